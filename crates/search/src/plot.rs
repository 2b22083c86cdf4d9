//! Charts of a search, as PNG and SVG: best-so-far curves of one or several studies on one chart
//! (lab 3: brute force against TPE), and the scatter of two objectives with the Pareto front.
//! Text is drawn with DejaVu Sans, shipped in `assets/` with its licence, so plots render the
//! same on a machine without fonts.

use crate::objective::Objective;
use crate::trial::TrialRecord;
use crate::{Result, SearchError};
use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;
use std::path::{Path, PathBuf};
use std::sync::Once;

static FONT: &[u8] = include_bytes!("../assets/DejaVuSans.ttf");
static REGISTER: Once = Once::new();

fn register_font() {
    REGISTER.call_once(|| {
        // The bytes are the shipped font file; a failure here would be a corrupt build.
        let _ = plotters::style::register_font("sans-serif", FontStyle::Normal, FONT);
    });
}

/// One curve: a label and `(x, y)` points.
#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    pub label: String,
    pub points: Vec<(f64, f64)>,
}

const COLORS: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
    RGBColor(255, 127, 14),
    RGBColor(23, 190, 207),
];

fn range(vals: impl Iterator<Item = f64>) -> (f64, f64) {
    let (lo, hi) = vals.filter(|v| v.is_finite()).fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| (a.min(v), b.max(v)));
    if !lo.is_finite() {
        return (0.0, 1.0);
    }
    let pad = if hi > lo { 0.05 * (hi - lo) } else { lo.abs().max(1.0) * 0.05 };
    (lo - pad, hi + pad)
}

/// What drawing fails with: the plotting library's error for the backend, boxed so that one
/// type serves every backend.
type DrawError = Box<dyn std::error::Error + Send + Sync>;

fn draw_err(path: &Path, source: DrawError) -> SearchError {
    SearchError::Plot { path: path.display().to_string(), source }
}

/// A chart on `root` with both axes over `f64` values.
type Chart<'a, DB> = ChartContext<'a, DB, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

/// Clears `root` to white and sets up a chart on it: the title, the labelled axes over the
/// ranges `(x, y)`, and the mesh. Both charts share it so that they look alike.
fn axes<'a, DB: DrawingBackend<ErrorType: 'static>>(
    root: &'a DrawingArea<DB, Shift>,
    title: &str,
    (x_label, y_label): (&str, &str),
    ((x0, x1), (y0, y1)): ((f64, f64), (f64, f64)),
) -> std::result::Result<Chart<'a, DB>, DrawError> {
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(root)
        .caption(title, ("sans-serif", 22))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(x0..x1, y0..y1)?;
    chart.configure_mesh().x_desc(x_label).y_desc(y_label).label_style(("sans-serif", 14)).draw()?;
    Ok(chart)
}

/// Draws the legend of the series labelled on `chart` and writes `root` out.
fn finish<'a, DB: DrawingBackend<ErrorType: 'static> + 'a>(
    chart: Chart<'a, DB>,
    root: &DrawingArea<DB, Shift>,
) -> std::result::Result<(), DrawError> {
    legend(chart)?;
    Ok(root.present()?)
}

/// Draws the legend of the series labelled on `chart`.
fn legend<'a, DB: DrawingBackend<ErrorType: 'static> + 'a>(mut chart: Chart<'a, DB>) -> std::result::Result<(), DrawError> {
    chart.configure_series_labels().background_style(WHITE.mix(0.85)).border_style(BLACK).label_font(("sans-serif", 14)).draw()?;
    Ok(())
}

/// Step curves (the value holds until the next point), with a legend.
fn draw_steps<DB: DrawingBackend<ErrorType: 'static>>(
    root: DrawingArea<DB, Shift>,
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[Series],
) -> std::result::Result<(), DrawError> {
    let x = range(series.iter().flat_map(|s| s.points.iter().map(|p| p.0)));
    let y = range(series.iter().flat_map(|s| s.points.iter().map(|p| p.1)));
    let mut chart = axes(&root, title, (x_label, y_label), (x, y))?;
    for (i, s) in series.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        chart
            .draw_series(LineSeries::new(step_path(s.points.iter().copied()), color.stroke_width(2)))?
            .label(s.label.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2)));
        chart.draw_series(s.points.iter().map(|&p| Circle::new(p, 2, color.filled())))?;
    }
    finish(chart, &root)
}

/// One sampler over several seeds: the mean curve and its min–max band.
#[derive(Clone, Debug, PartialEq)]
pub struct BandSeries {
    pub label: String,
    /// `(x, mean, min, max)`, in increasing `x`.
    pub points: Vec<(f64, f64, f64, f64)>,
}

/// The corners of a step curve through `points` (the value holds until the next point).
fn step_path(points: impl Iterator<Item = (f64, f64)>) -> Vec<(f64, f64)> {
    let mut steps: Vec<(f64, f64)> = Vec::new();
    for (x, y) in points {
        if let Some(&(_, prev)) = steps.last() {
            steps.push((x, prev));
        }
        steps.push((x, y));
    }
    steps
}

/// Mean step curves over shaded min–max bands, with a legend.
fn draw_bands<DB: DrawingBackend<ErrorType: 'static>>(
    root: DrawingArea<DB, Shift>,
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[BandSeries],
) -> std::result::Result<(), DrawError> {
    let x = range(series.iter().flat_map(|s| s.points.iter().map(|p| p.0)));
    let y = range(series.iter().flat_map(|s| s.points.iter().flat_map(|p| [p.2, p.3])));
    let mut chart = axes(&root, title, (x_label, y_label), (x, y))?;
    // Every band first, then every mean curve, so that no band covers a curve.
    for (i, s) in series.iter().enumerate().filter(|(_, s)| s.points.iter().any(|p| p.3 > p.2)) {
        let color = COLORS[i % COLORS.len()];
        // Along the max steps, then back along the min steps.
        let mut outline = step_path(s.points.iter().map(|p| (p.0, p.3)));
        outline.extend(step_path(s.points.iter().map(|p| (p.0, p.2))).into_iter().rev());
        chart.draw_series(std::iter::once(Polygon::new(outline, color.mix(0.2).filled())))?;
    }
    for (i, s) in series.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        chart
            .draw_series(LineSeries::new(step_path(s.points.iter().map(|p| (p.0, p.1))), color.stroke_width(2)))?
            .label(format!("{} (mean, min–max band)", s.label))
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2)));
    }
    finish(chart, &root)
}

/// All points in grey, the Pareto front in colour and joined.
fn draw_pareto<DB: DrawingBackend<ErrorType: 'static>>(
    root: DrawingArea<DB, Shift>,
    title: &str,
    x_label: &str,
    y_label: &str,
    all: &[(f64, f64)],
    front: &[(f64, f64)],
) -> std::result::Result<(), DrawError> {
    let x = range(all.iter().map(|p| p.0));
    let y = range(all.iter().map(|p| p.1));
    let mut chart = axes(&root, title, (x_label, y_label), (x, y))?;
    let grey = RGBColor(150, 150, 150);
    chart
        .draw_series(all.iter().map(|&p| Circle::new(p, 3, grey.filled())))?
        .label("trials")
        .legend(move |(x, y)| Circle::new((x + 10, y), 3, grey.filled()));
    let mut f = front.to_vec();
    f.sort_by(|a, b| a.0.total_cmp(&b.0));
    let red = COLORS[1];
    chart.draw_series(LineSeries::new(f.clone(), red.stroke_width(1)))?;
    chart
        .draw_series(f.iter().map(|&p| Circle::new(p, 5, red.filled())))?
        .label("Pareto front")
        .legend(move |(x, y)| Circle::new((x + 10, y), 5, red.filled()));
    finish(chart, &root)
}

const SIZE: (u32, u32) = (900, 600);

/// Draws into a temporary file beside `path` and renames it into place, so that workers of one
/// study drawing the same chart never leave a half-written file.
fn draw_atomic(path: &Path, draw: impl FnOnce(&Path) -> std::result::Result<(), DrawError>) -> Result<()> {
    let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("out");
    let tmp = path.with_extension(format!("{}.tmp.{ext}", std::process::id()));
    draw(&tmp).map_err(|e| draw_err(path, e))?;
    std::fs::rename(&tmp, path).map_err(|e| SearchError::write(path, e))
}

/// Writes `<stem>.png` and `<stem>.svg` with best-so-far step curves; returns both paths.
pub fn plot_best_so_far(stem: &Path, title: &str, y_label: &str, series: &[Series]) -> Result<Vec<PathBuf>> {
    register_font();
    let (png, svg) = (stem.with_extension("png"), stem.with_extension("svg"));
    draw_atomic(&png, |p| draw_steps(BitMapBackend::new(p, SIZE).into_drawing_area(), title, "trial", y_label, series))?;
    draw_atomic(&svg, |p| draw_steps(SVGBackend::new(p, SIZE).into_drawing_area(), title, "trial", y_label, series))?;
    Ok(vec![png, svg])
}

/// Writes `<stem>.png` and `<stem>.svg` with each series' mean step curve over its min–max band;
/// returns both paths.
pub fn plot_bands(stem: &Path, title: &str, y_label: &str, series: &[BandSeries]) -> Result<Vec<PathBuf>> {
    register_font();
    let (png, svg) = (stem.with_extension("png"), stem.with_extension("svg"));
    draw_atomic(&png, |p| draw_bands(BitMapBackend::new(p, SIZE).into_drawing_area(), title, "trial", y_label, series))?;
    draw_atomic(&svg, |p| draw_bands(SVGBackend::new(p, SIZE).into_drawing_area(), title, "trial", y_label, series))?;
    Ok(vec![png, svg])
}

/// Writes `<stem>.png` and `<stem>.svg` with every trial and the Pareto front of two objectives.
pub fn plot_pareto(
    stem: &Path,
    title: &str,
    x_label: &str,
    y_label: &str,
    all: &[(f64, f64)],
    front: &[(f64, f64)],
) -> Result<Vec<PathBuf>> {
    register_font();
    let (png, svg) = (stem.with_extension("png"), stem.with_extension("svg"));
    draw_atomic(&png, |p| draw_pareto(BitMapBackend::new(p, SIZE).into_drawing_area(), title, x_label, y_label, all, front))?;
    draw_atomic(&svg, |p| draw_pareto(SVGBackend::new(p, SIZE).into_drawing_area(), title, x_label, y_label, all, front))?;
    Ok(vec![png, svg])
}

/// One chart of a figure of several side by side: its title, axis labels and curves.
#[derive(Clone, Debug)]
pub struct Panel<'a> {
    pub title: &'a str,
    pub x_label: &'a str,
    pub y_label: &'a str,
    pub series: &'a [Series],
}

/// Straight lines through each series' points, with the points marked and a legend.
fn draw_lines<DB: DrawingBackend<ErrorType: 'static>>(area: &DrawingArea<DB, Shift>, panel: &Panel) -> std::result::Result<(), DrawError> {
    let x = range(panel.series.iter().flat_map(|s| s.points.iter().map(|p| p.0)));
    let y = range(panel.series.iter().flat_map(|s| s.points.iter().map(|p| p.1)));
    let mut chart = axes(area, panel.title, (panel.x_label, panel.y_label), (x, y))?;
    for (i, s) in panel.series.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        // A non-finite point would stretch or break the line; it is left out.
        let points: Vec<(f64, f64)> = s.points.iter().copied().filter(|p| p.0.is_finite() && p.1.is_finite()).collect();
        chart
            .draw_series(LineSeries::new(points.clone(), color.stroke_width(2)))?
            .label(s.label.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2)));
        chart.draw_series(points.iter().map(|&p| Circle::new(p, 3, color.filled())))?;
    }
    legend(chart)
}

fn draw_panels<DB: DrawingBackend<ErrorType: 'static>>(
    root: DrawingArea<DB, Shift>,
    title: &str,
    panels: &[Panel],
) -> std::result::Result<(), DrawError> {
    root.fill(&WHITE)?;
    let body = root.titled(title, ("sans-serif", 24))?;
    for (area, panel) in body.split_evenly((1, panels.len().max(1))).iter().zip(panels) {
        draw_lines(area, panel)?;
    }
    Ok(root.present()?)
}

/// Writes `<stem>.png` and `<stem>.svg`: the panels side by side under one title, each with
/// straight lines through its points (training curves per epoch); returns both paths.
pub fn plot_panels(stem: &Path, title: &str, panels: &[Panel]) -> Result<Vec<PathBuf>> {
    register_font();
    let size = (PANEL_SIZE.0 * panels.len().max(1) as u32, PANEL_SIZE.1);
    let (png, svg) = (stem.with_extension("png"), stem.with_extension("svg"));
    draw_atomic(&png, |p| draw_panels(BitMapBackend::new(p, size).into_drawing_area(), title, panels))?;
    draw_atomic(&svg, |p| draw_panels(SVGBackend::new(p, size).into_drawing_area(), title, panels))?;
    Ok(vec![png, svg])
}

/// The size of one panel of [`plot_panels`].
const PANEL_SIZE: (u32, u32) = (560, 460);

/// The charts of one study: the titles and the best-so-far curve (the hypervolume so far for
/// several objectives) with its axis label.
#[derive(Clone, Debug)]
pub struct StudyCharts<'a> {
    pub best_so_far_title: &'a str,
    pub pareto_title: &'a str,
    pub curve_label: &'a str,
    pub curve: Series,
}

/// Writes the charts of one study in `dir`: `best_so_far.{png,svg}` with the curve and, for two
/// objectives, `pareto.{png,svg}` with every feasible complete trial and the `front` marked.
/// Returns the files written.
pub fn plot_study(
    dir: &Path,
    charts: &StudyCharts<'_>,
    trials: &[TrialRecord],
    front: &[&TrialRecord],
    objective: &Objective,
) -> Result<Vec<PathBuf>> {
    let mut files =
        plot_best_so_far(&dir.join("best_so_far"), charts.best_so_far_title, charts.curve_label, std::slice::from_ref(&charts.curve))?;
    let names = objective.value_names();
    if names.len() == 2 {
        // A stored trial may hold fewer values than the objective (a study file written by hand
        // or by another version); such a trial is left out of the plot.
        let pt = |t: &TrialRecord| t.values.as_ref().and_then(|v| Some((*v.first()?, *v.get(1)?)));
        let all: Vec<(f64, f64)> = trials.iter().filter(|t| t.is_feasible_complete()).filter_map(pt).collect();
        let front: Vec<(f64, f64)> = front.iter().filter_map(|t| pt(t)).collect();
        files.extend(plot_pareto(
            &dir.join("pareto"),
            charts.pareto_title,
            &format!("{} (scaled)", names[0]),
            &format!("{} (scaled)", names[1]),
            &all,
            &front,
        )?);
    }
    Ok(files)
}
