//! The DSLReports bufferbloat grade: one definition, read by the lab's
//! reports and the engine's health verdict alike.
//!
//! # Principles
//! - DSLReports' speed test grades the latency a link adds under load
//!   (the loaded mean less the idle one): A+ under 5 ms, A under 30, B
//!   under 60, C under 200, D under 400, F beyond. Each edge belongs to
//!   the worse grade.

/// The grades, best first.
pub const GRADES: [&str; 6] = ["A+", "A", "B", "C", "D", "F"];

/// The DSLReports bufferbloat grade of `added_ms` of latency under load.
pub fn grade(added_ms: f64) -> &'static str {
    match added_ms {
        x if x < 5.0 => "A+",
        x if x < 30.0 => "A",
        x if x < 60.0 => "B",
        x if x < 200.0 => "C",
        x if x < 400.0 => "D",
        _ => "F",
    }
}

/// Rank of a grade, better first (for "the worst of"); an unknown one
/// ranks as F.
pub fn grade_rank(g: &str) -> usize {
    GRADES
        .iter()
        .position(|x| *x == g)
        .unwrap_or(GRADES.len() - 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grade_thresholds_are_dslreports() {
        let cases = [
            (0.0, "A+"),
            (4.99, "A+"),
            (5.0, "A"),
            (29.9, "A"),
            (30.0, "B"),
            (59.9, "B"),
            (60.0, "C"),
            (199.0, "C"),
            (200.0, "D"),
            (399.0, "D"),
            (400.0, "F"),
            (2000.0, "F"),
            (f64::NAN, "F"),
        ];
        for (ms, g) in cases {
            assert_eq!(grade(ms), g, "{ms} ms");
        }
    }

    #[test]
    fn ranks_follow_the_scale() {
        assert!(grade_rank("A+") < grade_rank("A"));
        assert!(grade_rank("D") < grade_rank("F"));
        assert_eq!(grade_rank("?"), grade_rank("F"));
    }
}
