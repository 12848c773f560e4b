//! Replacing the rule set while keeping the state table, as `pfctl -f` does:
//! established connections keep their states (and the queue names those
//! carry) across a reload; only new connections see the new rules.

use crate::addr::AddrTable;
use crate::rules::{self, CRule};
use crate::{Classifier, RuleStats};
use sluice_conf::ir;

impl Classifier {
    /// Swaps in the rules, tables and `set timeout` values of `cfg`.
    /// States, interface addresses and interned names survive; rule
    /// counters and per-rule state counts restart (the states of the old
    /// rules count against none of the new). The state limit stays what it
    /// was at construction; adaptive thresholds not written are 60 % and
    /// 120 % of it.
    pub fn reload_rules(&mut self, cfg: &ir::Config) {
        if !self.timeouts_fixed {
            self.timeouts = cfg.options.timeouts;
        }
        let limit = self.table.limit() as u64;
        let pct = |p: u64| u32::try_from(limit * p / 100).unwrap_or(u32::MAX);
        let adaptive = (
            cfg.options.adaptive_start.unwrap_or_else(|| pct(60)),
            cfg.options.adaptive_end.unwrap_or_else(|| pct(120)),
        );
        self.table_gen = self.table.reload(cfg.rules.len(), adaptive);
        self.tables = cfg
            .tables
            .iter()
            .map(|t| AddrTable::new(&t.entries))
            .collect();
        self.table_names = cfg.tables.iter().map(|t| t.name.clone()).collect();
        for ifq in &cfg.interfaces {
            self.iface(&ifq.ifname);
            for q in &ifq.queues {
                self.intern_queue(&q.name);
            }
        }
        let global = self.timeouts;
        let compiled: Vec<CRule> = cfg
            .rules
            .iter()
            .map(|r| rules::compile(r, &global, self))
            .collect();
        self.rule_stats = cfg
            .rules
            .iter()
            .map(|r| RuleStats {
                line: r.line,
                ..RuleStats::default()
            })
            .collect();
        self.rules = compiled;
        // Overloaded sources stay in their tables (they would otherwise be
        // let back in by any reload); tables only `overload` names exist
        // now that the rules are compiled.
        for (name, addr) in &self.overloaded {
            if let Some(i) = self.table_names.iter().position(|n| n == name) {
                if let Some(t) = self.tables.get_mut(i) {
                    t.add_host(*addr);
                }
            }
        }
    }
}
