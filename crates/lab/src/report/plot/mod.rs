//! Plots of a run and of a comparison, drawn with plotters into PNG and SVG.
//!
//! # Principles
//! - Text is drawn with DejaVu Sans loaded at runtime from the Debian package
//!   `fonts-dejavu-core` and registered with plotters once per process; when
//!   the file is missing, [`font`] says so with the package's name and the
//!   caller skips the plots (the data files are already written).
//! - Each figure is drawn by one generic function for both backends, so the
//!   PNG and the SVG always show the same thing.
//! - A plot never takes the run down: errors come back as text, and a panic
//!   inside the plotting library is caught at [`render`] and reported the
//!   same way; a half-written figure is removed so no page links to it.
//! - Axis ranges are computed here, finite and non-empty, from whatever the
//!   run recorded — nothing, one sample, or 20 ms next to 6 s.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use plotters::chart::MeshStyle;
use plotters::coord::ranged1d::ValueFormatter;
use plotters::coord::Shift;
use plotters::prelude::*;

use crate::model::RunResult;

const FONT_PATH: &str = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf";
const FONT_BOLD_PATH: &str = "/usr/share/fonts/truetype/dejavu/DejaVuSans-Bold.ttf";
const FONT_PACKAGE: &str = "fonts-dejavu-core";
/// The family every text style here names (plotters' `FontFamily::SansSerif`),
/// which is also what the SVG's `font-family` attribute says to browsers.
const FAMILY: &str = "sans-serif";

/// Pixel sizes: the single-run timeline, each compare column, the CDFs.
pub(super) const TIMELINE_SIZE: (u32, u32) = (1200, 800);
pub(super) const COLUMN_WIDTH: u32 = 640;
pub(super) const CDF_SIZE: (u32, u32) = (900, 600);
/// Columns of the compare timeline: beyond four the panels get too narrow
/// to read (the CLI compares 2–4 configurations).
pub(super) const MAX_COLUMNS: usize = 4;

/// Series colours (the tab10 palette: distinct and colour-blind tolerable).
const DOWN: RGBColor = RGBColor(31, 119, 180);
const UP: RGBColor = RGBColor(255, 127, 14);
const PING: RGBColor = RGBColor(44, 160, 44);
const IRTT: RGBColor = RGBColor(148, 103, 189);
const LOST: RGBColor = RGBColor(214, 39, 40);
const IDLE: RGBColor = RGBColor(90, 90, 90);
const PALETTE: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(255, 127, 14),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(23, 190, 207),
];

fn palette(i: usize) -> RGBColor {
    PALETTE[i % PALETTE.len()]
}

static FONT: OnceLock<Result<(), String>> = OnceLock::new();

/// Loads and registers the font once; `Err` names the missing package.
pub(super) fn font() -> Result<(), String> {
    FONT.get_or_init(|| {
        register(FONT_PATH, FontStyle::Normal).map_err(|e| {
            format!("plots skipped: {e} (install the Debian package {FONT_PACKAGE}: apt-get install {FONT_PACKAGE})")
        })?;
        // Bold is optional: plotters falls back to the normal face.
        let _ = register(FONT_BOLD_PATH, FontStyle::Bold);
        Ok(())
    })
    .clone()
}

fn register(path: &str, style: FontStyle) -> Result<(), String> {
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read {path}: {e}"))?;
    // plotters keeps fonts for the life of the process; leaking the bytes of
    // the (at most two) faces, once, is what gives it that lifetime.
    let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
    plotters::style::register_font(FAMILY, style, bytes)
        .map_err(|_| format!("{path} is not a usable TrueType font"))
}

/// A figure of the report, drawn the same way on any backend.
pub(super) trait Figure {
    fn draw_png(&self, root: &DrawingArea<BitMapBackend<'_>, Shift>) -> Result<(), String>;
    fn draw_svg(&self, root: &DrawingArea<SVGBackend<'_>, Shift>) -> Result<(), String>;
}

/// Implements [`Figure`] by a generic `draw` method of the type.
macro_rules! figure {
    ($t:ident) => {
        impl $crate::report::plot::Figure for $t<'_> {
            fn draw_png(
                &self,
                root: &plotters::drawing::DrawingArea<
                    plotters::backend::BitMapBackend<'_>,
                    plotters::coord::Shift,
                >,
            ) -> Result<(), String> {
                self.draw(root)
            }
            fn draw_svg(
                &self,
                root: &plotters::drawing::DrawingArea<
                    plotters::backend::SVGBackend<'_>,
                    plotters::coord::Shift,
                >,
            ) -> Result<(), String> {
                self.draw(root)
            }
        }
    };
}

// After the macro: the figures' modules use it by textual scope.
mod cdf;
mod timeline;

pub(super) use cdf::{CompareCdf, PhaseCdf};
pub(super) use timeline::Timeline;

/// Draws `fig` into `dir/stem.png` and `dir/stem.svg`.
pub(super) fn render(
    dir: &Path,
    stem: &str,
    size: (u32, u32),
    fig: &dyn Figure,
) -> Result<Vec<PathBuf>, String> {
    let png = dir.join(format!("{stem}.png"));
    let svg = dir.join(format!("{stem}.svg"));
    let result = guarded(|| {
        let root = BitMapBackend::new(&png, size).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        fig.draw_png(&root)?;
        root.present().map_err(err)
    })
    .and_then(|()| {
        guarded(|| {
            let root = SVGBackend::new(&svg, size).into_drawing_area();
            root.fill(&WHITE).map_err(err)?;
            fig.draw_svg(&root)?;
            root.present().map_err(err)
        })
    });
    match result {
        Ok(()) => Ok(vec![png, svg]),
        Err(e) => {
            // A figure is both files or neither: nothing links to half of one.
            let _ = std::fs::remove_file(&png);
            let _ = std::fs::remove_file(&svg);
            Err(e)
        }
    }
}

/// Runs `f`, turning a panic into an error.
fn guarded(f: impl FnOnce() -> Result<(), String>) -> Result<(), String> {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|p| {
        let msg = p
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| p.downcast_ref::<&str>().copied())
            .unwrap_or("unknown panic");
        Err(format!("the plotting library panicked: {msg}"))
    })
}

fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}

/// The house style of every chart's mesh: 13 px labels, 14 px axis
/// titles, faint grid lines (`bold_alpha` for the major ones).
fn house_mesh<'m, 'a, 'b, X, Y, XT, YT, DB>(
    mesh: &'m mut MeshStyle<'a, 'b, X, Y, DB>,
    bold_alpha: f64,
) -> &'m mut MeshStyle<'a, 'b, X, Y, DB>
where
    X: Ranged<ValueType = XT> + ValueFormatter<XT>,
    Y: Ranged<ValueType = YT> + ValueFormatter<YT>,
    DB: DrawingBackend,
{
    mesh.label_style(text(13))
        .axis_desc_style(text(14))
        .light_line_style(BLACK.mix(0.03))
        .bold_line_style(BLACK.mix(bold_alpha))
}

fn text(size: u32) -> TextStyle<'static> {
    (FAMILY, size).into_font().into()
}

fn bold(size: u32) -> TextStyle<'static> {
    // `FontDesc::style` keeps the face already loaded: ask for bold up front.
    (FAMILY, size, FontStyle::Bold).into_font().into()
}

/// An axis tick: `20`, `2.5`, `0.05` (never `20.0`).
fn tick(v: &f64) -> String {
    if !v.is_finite() {
        return String::new();
    }
    let s = format!("{v:.3}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s == "-0" {
        "0".into()
    } else {
        s.to_string()
    }
}

/// A line as separate two-point segments: plotters joins the segments of a
/// wide path with unbounded mitres, which shoot spikes off sharp turns
/// (an RTT falling from 2 s to 20 ms and rising again).
fn polyline(
    points: &[(f64, f64)],
    style: ShapeStyle,
) -> impl Iterator<Item = PathElement<(f64, f64)>> + '_ {
    points
        .windows(2)
        .map(move |w| PathElement::new(vec![w[0], w[1]], style))
}

/// Answered RTTs (ping and irtt) of a run, ms.
fn answered_rtts(run: &RunResult) -> impl Iterator<Item = f64> + '_ {
    let ping = run.series.ping.iter().filter_map(|p| p.rtt_ms);
    let irtt = run.series.irtt.iter().filter_map(|p| p.rtt_ms);
    ping.chain(irtt).filter(|x| x.is_finite() && *x >= 0.0)
}

/// The largest finite value, if any.
fn finite_max(values: impl Iterator<Item = f64>) -> Option<f64> {
    values.filter(|x| x.is_finite()).reduce(f64::max)
}

/// A "nice" step (1, 2 or 5 × 10^k) giving about `n` intervals over `span`.
fn nice_step(span: f64, n: f64) -> f64 {
    let raw = (span / n.max(1.0)).max(f64::MIN_POSITIVE);
    let mag = 10f64.powf(raw.log10().floor());
    let r = raw / mag;
    let f = if r <= 1.0 {
        1.0
    } else if r <= 2.0 {
        2.0
    } else if r <= 5.0 {
        5.0
    } else {
        10.0
    };
    f * mag
}

/// `s` shortened with an ellipsis to at most `max_chars` characters.
fn fit(s: &str, max_chars: usize) -> String {
    if s.chars().count() <= max_chars {
        return s.to_string();
    }
    if max_chars == 0 {
        return String::new();
    }
    let mut out: String = s.chars().take(max_chars - 1).collect();
    out.push('…');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nice_steps_are_one_two_five() {
        assert_eq!(nice_step(100.0, 5.0), 20.0);
        assert_eq!(nice_step(7.0, 7.0), 1.0);
        assert_eq!(nice_step(0.3, 6.0), 0.05);
        assert!(nice_step(0.0, 5.0) > 0.0);
    }

    #[test]
    fn ticks_drop_useless_decimals() {
        assert_eq!(tick(&20.0), "20");
        assert_eq!(tick(&2.5), "2.5");
        assert_eq!(tick(&0.05), "0.05");
        assert_eq!(tick(&-0.0001), "0");
        assert_eq!(tick(&f64::NAN), "");
    }

    #[test]
    fn fit_cuts_by_characters() {
        assert_eq!(fit("download+upload", 9), "download…");
        assert_eq!(fit("idle", 9), "idle");
        assert_eq!(fit("idle", 0), "");
    }

    struct Broken;

    impl Figure for Broken {
        fn draw_png(&self, root: &DrawingArea<BitMapBackend<'_>, Shift>) -> Result<(), String> {
            root.fill(&RED).map_err(err)
        }
        fn draw_svg(&self, _: &DrawingArea<SVGBackend<'_>, Shift>) -> Result<(), String> {
            panic!("svg exploded")
        }
    }

    #[test]
    fn a_figure_is_both_files_or_neither() {
        let dir = std::env::temp_dir().join(format!("sluice-report-broken-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let e = render(&dir, "broken", (64, 48), &Broken).unwrap_err();
        assert!(e.contains("svg exploded"), "{e}");
        assert!(!dir.join("broken.png").exists(), "the PNG half is removed");
        assert!(!dir.join("broken.svg").exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_panic_in_a_plot_is_an_error() {
        let e = guarded(|| panic!("boom")).unwrap_err();
        assert!(e.contains("boom"), "{e}");
    }
}
