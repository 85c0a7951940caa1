//! Unit tests of `render`, beside it so that its own file stays short.

proptest::proptest! {
    /// One pass over the bytes orders stacks as comparing their frames
    /// one by one does (`;`, space and other bytes below `;` included).
    #[test]
    fn frame_cmp_is_the_frame_by_frame_order(
        a in "[a-c; :<(é]{0,12}",
        b in "[a-c; :<(é]{0,12}",
    ) {
        proptest::prop_assert_eq!(frame_cmp(&a, &b), a.split(';').cmp(b.split(';')));
    }
}

use super::*;

#[test]
fn an_empty_profile_is_drawn_with_its_note_escaped() {
    let opts = RenderOptions {
        title: "q1 <worker>".into(),
        ..Default::default()
    };
    let why = "no sample: raise --frequency & repeat the query";
    let mut svg = Vec::new();
    render_empty(Format::Svg, &opts, why, &mut svg).unwrap();
    let svg = String::from_utf8(svg).unwrap();
    assert!(svg.contains("q1 &lt;worker&gt;"), "{svg}");
    assert!(svg.contains("raise --frequency &amp; repeat"), "{svg}");
    let mut page = Vec::new();
    render_empty(Format::Html, &opts, why, &mut page).unwrap();
    let page = String::from_utf8(page).unwrap();
    assert!(page.contains("id=\"jp-empty\""), "{page}");
    let mut folded = Vec::new();
    render_empty(Format::Folded, &opts, why, &mut folded).unwrap();
    assert!(folded.is_empty());
    let mut ss = Vec::new();
    render_empty(Format::Speedscope, &opts, why, &mut ss).unwrap();
    let v: serde_json::Value = serde_json::from_slice(&ss).unwrap();
    assert_eq!(v["profiles"][0]["samples"].as_array().unwrap().len(), 0);
}

#[test]
fn a_broken_pipe_while_writing_is_found_through_crate_error() {
    let source = io::Error::new(io::ErrorKind::BrokenPipe, "closed");
    let e = crate::Error::from(Error::Write {
        format: Format::Svg,
        source,
    });
    assert!(crate::error::is_broken_pipe(&e));
    assert!(!crate::error::is_broken_pipe(&Error::Internal("x".into())));
}

/// Issue 58, item 4: ns read as time in every tooltip.
#[test]
fn nanosecond_tooltips_read_as_time() {
    let stacks = [
        ("main;work", 5_314_629_216u64),
        ("main;idle (x)", 20_000_000),
    ];
    let mut o = RenderOptions {
        count_name: "ns".into(),
        ..RenderOptions::default()
    };
    let mut svg = Vec::new();
    render_svg(&stacks, &o, &mut svg).unwrap();
    let svg = String::from_utf8(svg).unwrap();
    assert!(
        svg.contains("<title>work (5.31 s, 99.63%)</title>"),
        "{svg}"
    );
    assert!(
        svg.contains("<title>idle (x) (20.0 ms, 0.37%)</title>"),
        "{svg}"
    );
    assert!(svg.contains("<title>all (5.33 s, 100%)</title>"), "{svg}");
    assert!(!svg.contains(" ns, "), "{svg}");
    // Other counts keep inferno's numbers.
    o.count_name = "samples".into();
    let mut svg = Vec::new();
    render_svg(&stacks, &o, &mut svg).unwrap();
    let svg = String::from_utf8(svg).unwrap();
    assert!(svg.contains("(5,314,629,216 samples, 99.63%)"), "{svg}");
}

#[test]
fn frame_order_keeps_a_call_path_together() {
    let stacks = [("main;f", 1u64), ("main.cold", 2), ("main", 3)];
    let mut held = Vec::new();
    let o = frame_ordered(&stacks, &mut held);
    let names: Vec<&str> = o.iter().map(|(s, _)| *s).collect();
    assert_eq!(names, ["main", "main;f", "main.cold"]);
}

#[test]
fn numeric_last_word_is_protected() {
    assert_eq!(protect_stack("a;foo 12"), "a;foo\u{a0}12");
    assert_eq!(protect_stack("a;foo bar"), "a;foo bar");
    assert_eq!(protect_stack("# x;y"), "#\u{a0}x;y");
}

#[test]
fn formats_parse() {
    assert_eq!("SVG".parse::<Format>().unwrap(), Format::Svg);
    assert_eq!(
        Format::parse_list("svg, html,svg").unwrap(),
        vec![Format::Svg, Format::Html]
    );
    assert!(Format::parse_list("all").unwrap().len() == 5);
    assert!("png".parse::<Format>().is_err());
    assert_eq!(
        Format::from_path(Path::new("x/p.speedscope.json")).unwrap(),
        Format::Speedscope
    );
    assert!(Format::from_path(Path::new("out")).is_err());
}

#[test]
fn capture_titles() {
    assert_eq!(
        capture_title(Some("42"), Some("3"), Some("q1")),
        "job 42 · worker 3 · query q1"
    );
    assert_eq!(capture_title(None, None, None), "Flame Graph");
}
