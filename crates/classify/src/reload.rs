//! Replacing the rule set while keeping the state table, as `pfctl -f` does:
//! established connections keep their states (and the queue names those
//! carry) across a reload; only new connections see the new rules.

use crate::addr::AddrTable;
use crate::rules::{self, CRule};
use crate::{Classifier, RuleStats};
use sluice_conf::ir;

impl Classifier {
    /// Swaps in the rules and tables of `cfg`. States, interface addresses and
    /// interned names survive; rule counters restart. The state limit stays
    /// what it was at construction.
    pub fn reload_rules(&mut self, cfg: &ir::Config) {
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
        let compiled: Vec<CRule> = cfg.rules.iter().map(|r| rules::compile(r, self)).collect();
        self.rule_stats = cfg
            .rules
            .iter()
            .map(|r| RuleStats {
                line: r.line,
                ..RuleStats::default()
            })
            .collect();
        self.rules = compiled;
    }
}
