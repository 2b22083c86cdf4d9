//! Text tables in the layouts of Python's `tabulate`, which MASE's reports use: `grid`
//! (report_node_meta_param), `simple` (report_node_type) and `orgtbl` (the quantization summary).
//!
//! As in tabulate, a column whose cells are all numbers is right-aligned (its header too), other
//! columns are left-aligned, every column is at least its header's width plus two, and cells may
//! hold several lines (grid only pads them to the tallest cell of the row).

/// A table layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TableFormat {
    Grid,
    Simple,
    Orgtbl,
}

/// A table of text cells under a header row.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Table {
    pub headers: Vec<String>,
    pub rows: Vec<Vec<String>>,
}

impl Table {
    /// An empty table with these headers.
    pub fn new<S: Into<String>>(headers: impl IntoIterator<Item = S>) -> Table {
        Table { headers: headers.into_iter().map(Into::into).collect(), rows: Vec::new() }
    }

    /// Appends a row; missing cells are empty.
    pub fn push<S: Into<String>>(&mut self, row: impl IntoIterator<Item = S>) {
        let mut r: Vec<String> = row.into_iter().map(Into::into).collect();
        r.resize(self.headers.len().max(r.len()), String::new());
        self.rows.push(r);
    }

    /// The table as text, without a trailing newline.
    pub fn render(&self, format: TableFormat) -> String {
        let ncols = self.headers.len().max(self.rows.iter().map(Vec::len).max().unwrap_or(0));
        let cell = |r: &Vec<String>, c: usize| r.get(c).cloned().unwrap_or_default();
        let right: Vec<bool> = (0..ncols).map(|c| !self.rows.is_empty() && self.rows.iter().all(|r| is_number(&cell(r, c)))).collect();
        let min_pad = 2;
        let widths: Vec<usize> = (0..ncols)
            .map(|c| {
                let h = self.headers.get(c).map_or(0, |h| width(h)) + min_pad;
                let body = self.rows.iter().flat_map(|r| cell(r, c).lines().map(width).collect::<Vec<_>>()).max().unwrap_or(0);
                h.max(body)
            })
            .collect();
        let pad = |s: &str, c: usize| {
            let fill = " ".repeat(widths[c].saturating_sub(width(s)));
            if right[c] {
                format!("{fill}{s}")
            } else {
                format!("{s}{fill}")
            }
        };
        // Rows as lists of physical lines, each line a list of padded cells.
        let physical = |r: &Vec<String>| -> Vec<Vec<String>> {
            let cells: Vec<Vec<String>> = (0..ncols).map(|c| cell(r, c).lines().map(str::to_string).collect()).collect();
            let height = cells.iter().map(Vec::len).max().unwrap_or(1).max(1);
            (0..height).map(|i| (0..ncols).map(|c| pad(cells[c].get(i).map_or("", String::as_str), c)).collect()).collect()
        };
        let header: Vec<String> = (0..ncols).map(|c| pad(self.headers.get(c).map_or("", String::as_str), c)).collect();
        let mut out: Vec<String> = Vec::new();
        match format {
            TableFormat::Grid => {
                let line = |ch: &str| format!("+{}+", widths.iter().map(|w| ch.repeat(w + 2)).collect::<Vec<_>>().join("+"));
                let row = |cells: &[String]| format!("| {} |", cells.join(" | "));
                out.push(line("-"));
                out.push(row(&header));
                out.push(line("="));
                for (i, r) in self.rows.iter().enumerate() {
                    for l in physical(r) {
                        out.push(row(&l));
                    }
                    if i + 1 < self.rows.len() {
                        out.push(line("-"));
                    }
                }
                out.push(line("-"));
            }
            TableFormat::Simple => {
                out.push(header.join("  "));
                out.push(widths.iter().map(|w| "-".repeat(*w)).collect::<Vec<_>>().join("  "));
                for r in &self.rows {
                    for l in physical(r) {
                        out.push(l.join("  "));
                    }
                }
            }
            TableFormat::Orgtbl => {
                let row = |cells: &[String]| format!("| {} |", cells.join(" | "));
                out.push(row(&header));
                out.push(format!("|{}|", widths.iter().map(|w| "-".repeat(w + 2)).collect::<Vec<_>>().join("+")));
                for r in &self.rows {
                    for l in physical(r) {
                        out.push(row(&l));
                    }
                }
            }
        }
        // tabulate strips trailing blanks of the simple format's lines only when the last column
        // is left-aligned text; keeping the padding everywhere is simpler and prints the same.
        out.join("\n")
    }

    /// The table as CSV (RFC 4180 quoting), header first, with a trailing newline.
    pub fn to_csv(&self) -> String {
        let mut s = String::new();
        let line = |cells: &[String]| cells.iter().map(|c| csv_field(c)).collect::<Vec<_>>().join(",");
        s += &line(&self.headers);
        s.push('\n');
        for r in &self.rows {
            s += &line(r);
            s.push('\n');
        }
        s
    }
}

/// Display width of a string: its number of characters (the reports hold no wide characters).
fn width(s: &str) -> usize {
    s.chars().count()
}

fn is_number(s: &str) -> bool {
    let t = s.trim();
    !t.is_empty() && t.parse::<f64>().is_ok() && !t.eq_ignore_ascii_case("nan") && !t.to_ascii_lowercase().contains("inf")
}

/// One CSV field, quoted when it holds a comma, a quote or a line break.
pub fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Table {
        let mut t = Table::new(["Node name", "Total"]);
        t.push(["x", "1"]);
        t.push(["seq_blocks_0", "12"]);
        t
    }

    #[test]
    fn layouts_match_tabulate() {
        let cases = [
            (
                TableFormat::Simple,
                "Node name       Total\n------------  -------\nx                   1\nseq_blocks_0       12",
            ),
            (
                TableFormat::Orgtbl,
                "| Node name    |   Total |\n|--------------+---------|\n| x            |       1 |\n| seq_blocks_0 |      12 |",
            ),
            (
                TableFormat::Grid,
                "+--------------+---------+\n| Node name    |   Total |\n+==============+=========+\n| x            |       1 |\n+--------------+---------+\n| seq_blocks_0 |      12 |\n+--------------+---------+",
            ),
        ];
        for (fmt, want) in cases {
            assert_eq!(sample().render(fmt), want, "{fmt:?}");
        }
    }

    #[test]
    fn grid_pads_multiline_cells() {
        let mut t = Table::new(["a", "b"]);
        t.push(["{'x': 1,\n 'y': 2}", "z"]);
        let want = "+----------+-----+\n| a        | b   |\n+==========+=====+\n| {'x': 1, | z   |\n|  'y': 2} |     |\n+----------+-----+";
        assert_eq!(t.render(TableFormat::Grid), want);
    }

    #[test]
    fn csv_quotes_when_needed() {
        let mut t = Table::new(["a", "b"]);
        t.push(["1,2", "say \"hi\""]);
        assert_eq!(t.to_csv(), "a,b\n\"1,2\",\"say \"\"hi\"\"\"\n");
    }
}
