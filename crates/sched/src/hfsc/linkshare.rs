//! The link-sharing criterion with upper limits (paper §V; ALTQ's
//! `init_vf` / `update_vf` / `get_minvt`).
//!
//! # Principles
//! - Every class with a link-sharing curve has a virtual time `vt`: the time
//!   at which its (runtime) ls curve reaches the bytes its subtree was served.
//!   At each level the active child with the smallest `vt` is chosen, so
//!   siblings are served in proportion to their curves.
//! - A class that becomes active is given the mean of the smallest vt handed
//!   out and the largest vt among its active siblings (and never less than it
//!   had, within one backlog period of its parent), or the largest vt seen when
//!   it is the first one: it gets no credit for the time it was idle.
//! - A child that was passed over because of an upper limit has its vt raised
//!   to the parent's `cvtmin` (`vtadj`), so it does not burst after.
//! - Upper limit: `myf` is when the ul curve reaches `total`; `f` is the max of
//!   `myf` and the smallest `f` of the active children (`cfmin`). A class with
//!   `f > now` is skipped. Since `f` of a parent is at most the `f` of its
//!   fittest child, `root.cfmin <= now` guarantees the descent finds a fit
//!   class at every level.
//! - Complexity: per level one B-tree update of `vt` (and of `f` when it
//!   changed): O(depth · log fan-out) per packet. Selection takes the first fit
//!   child in vt order: O(log fan-out) plus one step per sibling held by its
//!   upper limit.
//! - The root (slot 0) counts its active children in `nactive` too, so its
//!   children see backlog periods like any other class.

use super::class::{Class, ROOT};

fn mean(a: u64, b: u64) -> u64 {
    ((a as u128 + b as u128) / 2) as u64
}

fn update_cfmin(classes: &mut [Class], p: usize) {
    let c = &mut classes[p];
    c.cfmin = c.cf_set.first().map(|&(f, _)| f).unwrap_or(0);
}

/// Re-keys `c`'s fit time in its parent's set when it changed.
fn set_f(classes: &mut [Class], c: usize, p: usize, f: u64) {
    let old = classes[c].f;
    if old != f {
        classes[c].f = f;
        let cf = &mut classes[p].cf_set;
        cf.remove(&(old, c as u32));
        cf.insert((f, c as u32));
    }
}

/// A leaf with a link-sharing curve became backlogged (`init_vf`).
pub(crate) fn activate(classes: &mut [Class], leaf: u32, now: u64) {
    let mut go_active = true;
    let mut c = leaf as usize;
    // Walks up to the root: bounded by the depth of the tree.
    while let Some(p) = classes[c].parent {
        let p = p as usize;
        if go_active {
            go_active = classes[c].nactive == 0;
            classes[c].nactive += 1;
        }
        if go_active {
            let (cvtmin, cvtoff, pperiod, pactive, max_vt) = {
                let pc = &classes[p];
                (
                    pc.cvtmin,
                    pc.cvtoff,
                    pc.vtperiod,
                    pc.nactive,
                    pc.vt_set.last().map(|&(vt, _)| vt),
                )
            };
            let cl = &mut classes[c];
            match max_vt {
                Some(max_vt) => {
                    let vt = if cvtmin != 0 {
                        mean(cvtmin, max_vt)
                    } else {
                        max_vt
                    };
                    // Within one backlog period of the parent a class never
                    // moves back in virtual time (no credit for idling).
                    if pperiod != cl.parentperiod || vt > cl.vt {
                        cl.vt = vt;
                    }
                }
                None => {
                    // First active child of a new backlog period of the parent.
                    cl.vt = cvtoff;
                }
            }
            if let Some(ls) = cl.ls {
                cl.virt.min_with(&ls, cl.vt, cl.total);
            }
            cl.vtadj = 0;
            cl.vtperiod += 1;
            cl.parentperiod = pperiod;
            if pactive == 0 {
                // The parent starts a new period on the next step up.
                cl.parentperiod += 1;
            }
            cl.f = 0;
            if let Some(ul) = cl.ul {
                cl.ulimit.min_with(&ul, now, cl.total);
                cl.myf = cl.ulimit.y2x(&ul, cl.total);
            }
            let (vt, f) = (cl.vt, cl.f);
            let pc = &mut classes[p];
            if max_vt.is_none() {
                pc.cvtmin = 0;
            }
            pc.vt_set.insert((vt, c as u32));
            pc.cf_set.insert((f, c as u32));
        }
        let f = classes[c].myf.max(classes[c].cfmin);
        set_f(classes, c, p, f);
        update_cfmin(classes, p);
        c = p;
    }
    if go_active {
        let root = &mut classes[ROOT as usize];
        if root.nactive == 0 {
            root.vtperiod += 1;
        }
        root.nactive += 1;
    }
}

/// `len` bytes of `leaf` were sent (by either criterion); `go_passive` when
/// the leaf has nothing left (`update_vf`).
pub(crate) fn update(classes: &mut [Class], leaf: u32, len: u64, go_passive: bool) {
    let mut go_passive = go_passive;
    let mut c = leaf as usize;
    // Walks up to the root: bounded by the depth of the tree.
    while let Some(p) = classes[c].parent {
        let p = p as usize;
        classes[c].total = classes[c].total.saturating_add(len);
        let Some(ls) = classes[c].ls else {
            // Not link-sharing (a real-time-only leaf): never counted as
            // active by its parent, so its emptying changes no count.
            go_passive = false;
            c = p;
            continue;
        };
        if classes[c].nactive == 0 {
            go_passive = false;
            c = p;
            continue;
        }
        if go_passive {
            classes[c].nactive -= 1;
            go_passive = classes[c].nactive == 0;
        }
        let pcvtmin = classes[p].cvtmin;
        let cl = &mut classes[c];
        let old_vt = cl.vt;
        cl.vt = cl.virt.y2x(&ls, cl.total).saturating_add(cl.vtadj);
        if cl.vt < pcvtmin {
            // Skipped in the past (held by an upper limit): catch up so it
            // does not take a burst of service now.
            cl.vtadj += pcvtmin - cl.vt;
            cl.vt = pcvtmin;
        }
        let (vt, f) = (cl.vt, cl.f);
        if go_passive {
            let pc = &mut classes[p];
            pc.cvtoff = pc.cvtoff.max(vt);
            pc.vt_set.remove(&(old_vt, c as u32));
            pc.cf_set.remove(&(f, c as u32));
            update_cfmin(classes, p);
            c = p;
            continue;
        }
        if vt != old_vt {
            let set = &mut classes[p].vt_set;
            set.remove(&(old_vt, c as u32));
            set.insert((vt, c as u32));
        }
        let cl = &mut classes[c];
        if let Some(ul) = cl.ul {
            cl.myf = cl.ulimit.y2x(&ul, cl.total);
        }
        let f = cl.myf.max(cl.cfmin);
        if f != cl.f {
            set_f(classes, c, p, f);
            update_cfmin(classes, p);
        }
        c = p;
    }
    if go_passive {
        let root = &mut classes[ROOT as usize];
        root.nactive = root.nactive.saturating_sub(1);
    }
}

/// The leaf link-sharing picks at `now`, or None when every active class is
/// held by an upper limit (or none is active). Skipped classes count an
/// overlimit.
pub(crate) fn select(classes: &mut [Class], now: u64) -> Option<u32> {
    let root = &classes[ROOT as usize];
    if root.vt_set.is_empty() || root.cfmin > now {
        return None;
    }
    let mut c = ROOT as usize;
    // Descends one level per step: bounded by the depth of the tree.
    while !classes[c].is_leaf() {
        // Taken out for the scan so the skipped siblings can be counted.
        let set = std::mem::take(&mut classes[c].vt_set);
        let mut pick = None;
        // First fit in vt order; each step passes one sibling held by its upper
        // limit, so bounded by the fan-out.
        for &(_, s) in set.iter() {
            let s = s as usize;
            if classes[s].f <= now {
                pick = Some(s);
                break;
            }
            classes[s].stats.overlimits += 1;
        }
        classes[c].vt_set = set;
        let child = pick?;
        let vt = classes[child].vt;
        let pc = &mut classes[c];
        if pc.cvtmin < vt {
            pc.cvtmin = vt;
        }
        c = child;
    }
    Some(c as u32)
}

/// Counts an overlimit on the path of smallest fit times: the classes whose
/// upper limit holds the whole tree back.
pub(crate) fn count_held(classes: &mut [Class], now: u64) {
    let mut c = ROOT as usize;
    // One level per step: bounded by the depth of the tree.
    loop {
        let Some(&(f, s)) = classes[c].cf_set.first() else {
            return;
        };
        if f <= now {
            return;
        }
        let s = s as usize;
        if classes[s].myf > now {
            classes[s].stats.overlimits += 1;
        }
        c = s;
    }
}
