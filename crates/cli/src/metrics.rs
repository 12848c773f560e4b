//! The flags of `sluice run --metrics`; the endpoint itself is
//! `sluice_control::metrics`.

use std::net::SocketAddr;

/// The flags `run` takes for the endpoint (`#[command(flatten)]`).
#[derive(clap::Args, Clone, Debug, Default)]
pub struct MetricsArgs {
    /// Serve Prometheus metrics at http://ADDR:PORT/metrics (e.g. 127.0.0.1:9188).
    #[arg(long, value_name = "ADDR:PORT")]
    pub metrics: Option<SocketAddr>,
    /// Allow --metrics on a non-loopback address (the counters reveal traffic).
    #[arg(long, requires = "metrics")]
    pub metrics_public: bool,
}

impl MetricsArgs {
    /// The address to serve, once checked against the loopback rule.
    pub fn addr(&self) -> Result<Option<SocketAddr>, String> {
        match self.metrics {
            Some(a) if !a.ip().is_loopback() && !self.metrics_public => Err(format!(
                "--metrics {a}: not a loopback address; add --metrics-public to serve it there"
            )),
            other => Ok(other),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_only_unless_public() {
        let a = |s: &str, public: bool| MetricsArgs {
            metrics: Some(s.parse().unwrap()),
            metrics_public: public,
        };
        assert!(a("127.0.0.1:9188", false).addr().is_ok());
        assert!(a("[::1]:9188", false).addr().is_ok());
        let e = a("0.0.0.0:9188", false).addr().unwrap_err();
        assert!(e.contains("--metrics-public"), "{e}");
        assert!(a("192.0.2.1:9188", false).addr().is_err());
        assert_eq!(
            a("0.0.0.0:9188", true).addr().unwrap(),
            Some("0.0.0.0:9188".parse().unwrap())
        );
        assert_eq!(MetricsArgs::default().addr().unwrap(), None);
    }
}
