//! Building the engine from the config, and swapping in a new one.

use super::control::retune;
use super::*;

impl Engine {
    /// Builds the engine. Fails without side effects if any tree cannot be built.
    pub fn new(cfg: &ir::Config, opts: Options) -> Result<Engine, BuildError> {
        let mut classifier = Classifier::new(
            cfg,
            sluice_classify::Options {
                hash_key: opts.hash_key,
                ..Default::default()
            },
        );
        let mut ifaces = Vec::with_capacity(opts.ifaces.len());
        for name in &opts.ifaces {
            let cid = classifier.iface(name);
            ifaces.push(Iface {
                name: name.clone(),
                cid,
                tree: None,
                classes: HashMap::new(),
                passthrough: PrioQueue::default(),
                overhead: Overhead::NONE,
                auto_mss: [None; 2],
                learn_addrs: true,
                lan_side: false,
                counters: IfaceCounters::default(),
                autorate: None,
                wire_free: Instant::ZERO,
            });
        }
        for (idx, nets) in &opts.iface_addrs {
            if let Some(i) = ifaces.get_mut(*idx) {
                classifier.set_iface_addrs(i.cid, nets);
                i.learn_addrs = false;
            }
        }
        let mut peer = vec![None; ifaces.len()];
        for &(a, b) in &opts.bridge {
            if a < peer.len() && b < peer.len() {
                peer[a] = Some(b);
                peer[b] = Some(a);
                ifaces[a].lan_side = true;
            }
        }
        let lan = ifaces.iter().map(|i| i.lan_side).collect();
        let path = Monitor::new(peer.clone(), lan, opts.hash_key);
        let mut e = Engine {
            ifaces,
            peer,
            classifier,
            drops: Vec::new(),
            dropped: VecDeque::new(),
            last_now: Instant::ZERO,
            next_housekeeping: Instant::ZERO,
            next_id: 0,
            memory: MemoryReport {
                limit_bytes: DEFAULT_MEMORY_LIMIT,
                ..MemoryReport::default()
            },
            spare: Vec::new(),
            tcp: TcpCtl::default(),
            next_autorate: None,
            autorate_log: VecDeque::new(),
            autorate_trace: false,
            wall: None,
            path,
            nat: Default::default(),
            health: Vec::new(),
            next_health: Instant::ZERO,
            health_log: VecDeque::new(),
        };
        let trees = e.build_trees(cfg)?;
        e.install(cfg, trees);
        Ok(e)
    }

    pub(super) fn build_trees(&self, cfg: &ir::Config) -> Result<Vec<Option<Tree>>, BuildError> {
        let mut trees: Vec<Option<Tree>> = self.ifaces.iter().map(|_| None).collect();
        for q in &cfg.interfaces {
            if let Some(i) = self.ifaces.iter().position(|f| f.name == q.ifname) {
                trees[i] = Some(build_tree(q)?);
            }
            // A config may name interfaces this engine does not run; pf
            // likewise loads altq for absent interfaces without complaint.
        }
        Ok(trees)
    }

    pub(super) fn install(&mut self, cfg: &ir::Config, trees: Vec<Option<Tree>>) {
        for (iface, tree) in self.ifaces.iter_mut().zip(trees) {
            iface.classes.clear();
            if let Some(t) = &tree {
                for c in &t.classes {
                    let q = self.classifier.queue_lookup(&c.name);
                    if let Some(q) = q {
                        iface.classes.insert(q, c.id);
                    }
                }
            }
            iface.tree = tree;
            iface.overhead = cfg.options.overhead_of(&iface.name);
            let rate = cfg
                .interfaces
                .iter()
                .find(|q| q.ifname == iface.name)
                .map(ir::IfaceQueueing::shaped_rate);
            iface.auto_mss = [sluice_wire::Af::V4, sluice_wire::Af::V6]
                .map(|af| rate.and_then(|r| crate::mss::auto(r, iface.overhead, af)));
            // A reload with the same bounds keeps the controller and the
            // rate it found; new bounds start again at the bandwidth.
            let want = cfg.options.autorate_of(&iface.name);
            let keep = iface
                .autorate
                .take()
                .filter(|(c, _)| Some(c.config()) == want);
            iface.autorate = match (want, iface.tree.as_mut(), keep) {
                (Some(_), Some(t), Some((c, r))) => {
                    // TCP control's pacers are built from the classes below.
                    if !c.config().dry_run {
                        retune(t, c.rate(), self.last_now, &mut self.drops);
                    }
                    Some((c, r))
                }
                (Some(a), Some(t), None) => {
                    let mut c = Controller::new(a, t.bandwidth, Tuning::default());
                    c.set_wall_clock(self.wall);
                    // The download's root is on the LAN side: its queue
                    // lies before sluice. Any other's lies after it.
                    let c = if iface.lan_side { c } else { c.way_out() };
                    Some((c, Reading::default()))
                }
                _ => None,
            };
        }
        // A probe goes out on the WAN side of a pair (an interface that is
        // not a LAN side) for the autorate of either of its shapers; the
        // upload's names it first. A reload naming the same target keeps
        // its base and counters.
        for idx in 0..self.ifaces.len() {
            let probe_of = |i: usize| {
                cfg.options
                    .autorate_of(&self.ifaces[i].name)
                    .and_then(|a| a.probe)
            };
            let target = if self.ifaces[idx].lan_side {
                None
            } else {
                probe_of(idx).or_else(|| self.peer[idx].and_then(probe_of))
            };
            self.path.set_probe(idx, target);
            self.path.set_rate(idx, self.rate(idx));
        }
        self.next_autorate = self
            .ifaces
            .iter()
            .filter_map(|i| i.autorate.as_ref().map(|(c, _)| c.next_tick()))
            .min();
        // Health: one per shaped interface; a reload keeps its history.
        // It reads the way in and the delivery, so they are measured.
        self.health.resize_with(self.ifaces.len(), || None);
        for (h, i) in self.health.iter_mut().zip(&self.ifaces) {
            let shaped = i.tree.as_ref().is_some_and(|t| t.bandwidth > Rate::ZERO);
            match (shaped, h.is_some()) {
                (true, false) => *h = Some(Health::new()),
                (false, _) => *h = None,
                _ => {}
            }
        }
        let health = self.health.iter().any(Option::is_some);
        self.path.set_wanted(self.next_autorate.is_some() || health);
        let classes: Vec<(&[crate::build::ClassInfo], Overhead, bool)> = self
            .ifaces
            .iter()
            .map(|i| {
                (
                    i.tree.as_ref().map_or(&[][..], |t| &t.classes[..]),
                    i.overhead,
                    i.lan_side,
                )
            })
            .collect();
        self.tcp.configure(self.last_now, &classes);
    }

    /// Swaps in a new configuration. Every tree is built first; on any error
    /// nothing changes. Queues that keep their name keep their packets.
    pub fn reload(&mut self, cfg: &ir::Config) -> Result<ReloadReport, BuildError> {
        let mut trees = self.build_trees(cfg)?;
        let now = self.last_now;
        // Held ACKs join their queues first, so the move below keeps them.
        self.tcp.release_all();
        self.drain_released(now);
        let mut report = ReloadReport::default();
        self.classifier.reload_rules(cfg);
        for (idx, new_tree) in trees.iter_mut().enumerate() {
            let mut old: Vec<Packet> = Vec::new();
            let mut old_names: HashMap<ClassId, String> = HashMap::new();
            if let Some(t) = self.ifaces[idx].tree.as_mut() {
                t.root.purge(&mut self.drops);
                old.extend(self.drops.drain(..).map(|d| d.pkt));
                old_names = t.classes.iter().map(|c| (c.id, c.name.clone())).collect();
            }
            for mut pkt in old {
                let target = new_tree.as_ref().and_then(|t| {
                    let name = old_names.get(&pkt.class)?;
                    t.classes.iter().find(|c| &c.name == name).map(|c| c.id)
                });
                match (target, new_tree.as_mut()) {
                    (Some(class), Some(t)) => {
                        pkt.class = class;
                        t.root.enqueue(pkt, now, &mut self.drops);
                        report.kept += 1;
                    }
                    _ => {
                        report.dropped += 1;
                        self.memory.release(pkt.truesize());
                        self.ifaces[idx].counters.reload_drops += 1;
                        self.give_back(idx, pkt.data, DropCause::Reload);
                    }
                }
            }
            // Moving may overflow a smaller new queue: those count as drops.
            let overflow = self.drops.len() as u64;
            report.kept -= overflow.min(report.kept);
            report.dropped += overflow;
            self.absorb_drops(idx);
        }
        self.install(cfg, trees);
        Ok(report)
    }
}
