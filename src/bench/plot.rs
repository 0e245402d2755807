//! What every SVG plot of `bench` and `plan` shares: the frame (caption,
//! margins, label areas), legend swatches and the legend box.

use plotters::{
    coord::{CoordTranslate, Shift},
    prelude::*,
};

/// A chart builder with the house frame.
pub fn frame<'a, 'b, DB: DrawingBackend>(root: &'a DrawingArea<DB, Shift>, title: &str) -> ChartBuilder<'a, 'b, DB> {
    let mut b = ChartBuilder::on(root);
    b.caption(title, ("sans-serif", 18)).margin(16).x_label_area_size(42).y_label_area_size(64);
    b
}

/// A plotted line: its legend name, its colour and how to read its value
/// from a point.
pub type Series<T> = (&'static str, RGBColor, fn(&T) -> f64);

/// A legend swatch: a short line in `style`.
pub fn swatch(style: ShapeStyle) -> impl Fn((i32, i32)) -> PathElement<(i32, i32)> {
    move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], style)
}

/// The legend box, upper left.
pub fn legend<'a, DB: DrawingBackend + 'a, CT: CoordTranslate>(
    chart: &mut ChartContext<'a, DB, CT>,
) -> Result<(), String> {
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(|e| format!("legend: {e}"))
}
