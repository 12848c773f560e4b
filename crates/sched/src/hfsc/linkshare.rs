//! The link-sharing criterion with upper limits (paper §V; ALTQ's
//! `init_vf` / `update_vf` / `get_minvt`).
//!
//! # Principles
//! - Every class with a link-sharing curve has a virtual time `vt`: the time
//!   at which its (runtime) ls curve reaches the bytes its subtree was served.
//!   At each level the active child with the smallest `vt` is chosen, so
//!   siblings are served in proportion to their curves.
//! - A class that becomes active is given the mean of the smallest vt handed
//!   out (`cvtmin`) and the largest vt among its active siblings, and never
//!   less than it had within one backlog period of its parent; the first child
//!   of a period starts at the largest vt seen before (`cvtoff`, ALTQ's
//!   `cvtmax`). So a class gets no credit for the time it was idle. The
//!   largest vt is found by a pass over the active siblings when a class
//!   becomes active (not per packet: a backlogged class is activated once).
//! - A child passed over because of an upper limit has its vt raised to the
//!   parent's `cvtmin` (`vtadj`), so it does not burst after.
//! - Upper limit: `myf` is when the ul curve reaches `total`; a class's fit
//!   time is `f = max(myf, cfmin)` with `cfmin` the smallest `f` among its
//!   active children. A class with `f > now` cannot be chosen.
//! - Structure: the active children of each class are split in two indexed
//!   heaps: `fit` (f <= now when last placed) by vt, and `held` (f > now) by
//!   f. Selection promotes the held children whose `f` has come, then takes
//!   the minimum of `fit`: O(log fan-out) per level, no scan (ALTQ scans the
//!   vt-ordered list for the first fit class). Since time only moves forward,
//!   a class placed in `fit` stays fit until its `f` is recomputed, which
//!   happens on every change below it; so `cfmin` is 0 when `fit` is
//!   non-empty, else the minimum of `held`, and descent from a fit class always
//!   finds a fit child.
//! - Complexity per packet: O(depth · log fan-out).
//! - The root (slot 0) counts its active children in `nactive` too, so its
//!   children see backlog periods like any other class.

use super::class::{Class, LsSlot, ROOT};
use super::heap::{Heap, NOT_IN_HEAP};

fn mean(a: u64, b: u64) -> u64 {
    ((a as u128 + b as u128) / 2) as u64
}

/// The per-class heaps of active children.
#[derive(Default)]
pub(crate) struct LinkShare {
    fit: Vec<Heap>,
    held: Vec<Heap>,
    /// Position of each class in the heap of its parent that holds it.
    pos: Vec<u32>,
}

impl LinkShare {
    /// Room for `slots` classes.
    pub(crate) fn grow(&mut self, slots: usize) {
        self.fit.resize_with(slots, Heap::default);
        self.held.resize_with(slots, Heap::default);
        self.pos.resize(slots, NOT_IN_HEAP);
    }

    fn has_active(&self, p: usize) -> bool {
        !self.fit[p].is_empty() || !self.held[p].is_empty()
    }

    /// Smallest fit time among the active children of `c`, with every fit
    /// one counted as 0 (see the module notes: only `<= now` matters).
    fn cfmin(&self, c: usize) -> u64 {
        if !self.fit[c].is_empty() {
            0
        } else {
            self.held[c].peek().map_or(0, |(f, _)| f)
        }
    }

    /// Largest vt among the active children of `p` (0 if none). One pass over
    /// them: bounded by the fan-out, and only run on activation.
    fn max_active_vt(&self, classes: &[Class], p: usize) -> u64 {
        let fit = self.fit[p].iter().map(|(vt, _)| vt);
        let held = self.held[p].iter().map(|(_, s)| classes[s as usize].vt);
        fit.chain(held).max().unwrap_or(0)
    }

    /// Recomputes `f` of the active class `c` and files it in its parent
    /// `p`'s `fit` or `held` heap.
    fn place(&mut self, classes: &mut [Class], c: usize, p: usize, now: u64) {
        // A leaf has no children: its fit time is its own.
        let cfmin = if classes[c].is_leaf() {
            0
        } else {
            self.cfmin(c)
        };
        let f = classes[c].myf.max(cfmin);
        let cl = &mut classes[c];
        cl.f = f;
        let want = if f <= now { LsSlot::Fit } else { LsSlot::Held };
        let slot = c as u32;
        match (cl.ls_slot, want) {
            (LsSlot::Fit, LsSlot::Fit) => self.fit[p].rekey(slot, cl.vt, &mut self.pos),
            (LsSlot::Held, LsSlot::Held) => self.held[p].rekey(slot, f, &mut self.pos),
            (old, _) => {
                match old {
                    LsSlot::Fit => self.fit[p].remove(slot, &mut self.pos),
                    LsSlot::Held => self.held[p].remove(slot, &mut self.pos),
                    LsSlot::Out => {}
                }
                if want == LsSlot::Fit {
                    self.fit[p].push(cl.vt, slot, &mut self.pos);
                } else {
                    if cl.myf > now {
                        // Held back by its own upper limit.
                        cl.stats.overlimits += 1;
                    }
                    self.held[p].push(f, slot, &mut self.pos);
                }
            }
        }
        cl.ls_slot = want;
    }

    fn unplace(&mut self, classes: &mut [Class], c: usize, p: usize) {
        let slot = c as u32;
        match classes[c].ls_slot {
            LsSlot::Fit => self.fit[p].remove(slot, &mut self.pos),
            LsSlot::Held => self.held[p].remove(slot, &mut self.pos),
            LsSlot::Out => {}
        }
        classes[c].ls_slot = LsSlot::Out;
    }

    /// A leaf with a link-sharing curve became backlogged (`init_vf`).
    pub(crate) fn activate(&mut self, classes: &mut [Class], leaf: u32, now: u64) {
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
                let siblings = self.has_active(p);
                let pc = &classes[p];
                let (cvtmin, cvtoff, pperiod, pactive) =
                    (pc.cvtmin, pc.cvtoff, pc.vtperiod, pc.nactive);
                let cvtmax = self.max_active_vt(classes, p);
                let cl = &mut classes[c];
                if siblings {
                    let vt = if cvtmin != 0 {
                        mean(cvtmin, cvtmax)
                    } else {
                        cvtmax
                    };
                    // Within one backlog period of the parent a class never
                    // moves back in virtual time (no credit for idling).
                    if pperiod != cl.parentperiod || vt > cl.vt {
                        cl.vt = vt;
                    }
                } else {
                    // First active child of a new backlog period of the parent.
                    cl.vt = cvtoff;
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
                cl.myf = 0;
                if let Some(ul) = cl.ul {
                    cl.ulimit.min_with(&ul, now, cl.total);
                    cl.myf = cl.ulimit.y2x(&ul, cl.total);
                }
                if !siblings {
                    classes[p].cvtmin = 0;
                }
            }
            self.place(classes, c, p, now);
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

    /// `len` bytes of `leaf` were sent (by either criterion); `go_passive`
    /// when the leaf has nothing left (`update_vf`).
    pub(crate) fn update(
        &mut self,
        classes: &mut [Class],
        leaf: u32,
        len: u64,
        go_passive: bool,
        now: u64,
    ) {
        let mut go_passive = go_passive;
        let mut c = leaf as usize;
        // Walks up to the root: bounded by the depth of the tree.
        while let Some(p) = classes[c].parent {
            let p = p as usize;
            classes[c].total = classes[c].total.saturating_add(len);
            let ls = match classes[c].ls {
                Some(ls) if classes[c].nactive > 0 => ls,
                _ => {
                    // Not link-sharing active (a real-time-only leaf): its
                    // parent never counted it, so its emptying changes nothing.
                    go_passive = false;
                    c = p;
                    continue;
                }
            };
            if go_passive {
                classes[c].nactive -= 1;
                go_passive = classes[c].nactive == 0;
            }
            let pcvtmin = classes[p].cvtmin;
            let cl = &mut classes[c];
            cl.vt = cl.virt.y2x(&ls, cl.total).saturating_add(cl.vtadj);
            if cl.vt < pcvtmin {
                // Skipped in the past (held by an upper limit): catch up so it
                // does not take a burst of service now.
                cl.vtadj = cl.vtadj.saturating_add(pcvtmin - cl.vt);
                cl.vt = pcvtmin;
            }
            if let Some(ul) = cl.ul {
                cl.myf = cl.ulimit.y2x(&ul, cl.total);
            }
            let vt = cl.vt;
            if go_passive {
                let pc = &mut classes[p];
                pc.cvtoff = pc.cvtoff.max(vt);
                self.unplace(classes, c, p);
            } else {
                self.place(classes, c, p, now);
            }
            c = p;
        }
        if go_passive {
            let root = &mut classes[ROOT as usize];
            root.nactive = root.nactive.saturating_sub(1);
        }
    }

    /// The leaf link-sharing picks at `now`, or None when every active class
    /// is held by an upper limit (or none is active).
    pub(crate) fn select(&mut self, classes: &mut [Class], now: u64) -> Option<u32> {
        let LinkShare { fit, held, pos } = self;
        let mut c = ROOT as usize;
        // Descends one level per step: bounded by the depth of the tree.
        while !classes[c].is_leaf() {
            // Children whose fit time has come; each moves once per update.
            while let Some((f, s)) = held[c].peek() {
                if f > now {
                    break;
                }
                held[c].pop(pos);
                let child = &mut classes[s as usize];
                fit[c].push(child.vt, s, pos);
                child.ls_slot = LsSlot::Fit;
            }
            let (vt, child) = fit[c].peek()?;
            let pc = &mut classes[c];
            if pc.cvtmin < vt {
                pc.cvtmin = vt;
            }
            c = child as usize;
        }
        Some(c as u32)
    }

    /// When link-sharing can send next: `Some(now-or-earlier)` if a class is
    /// fit, the earliest fit time if all are held, `None` if none is active.
    pub(crate) fn next_fit(&self) -> Option<u64> {
        let r = ROOT as usize;
        if !self.fit[r].is_empty() {
            return Some(0);
        }
        self.held[r].peek().map(|(f, _)| f)
    }

    pub(crate) fn clear(&mut self) {
        let LinkShare { fit, held, pos } = self;
        for h in fit.iter_mut().chain(held.iter_mut()) {
            h.clear(pos);
        }
    }
}
