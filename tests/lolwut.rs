//! LOLWUT over TCP: the drawings Redis makes with dice have the size
//! Redis gives them (exact drawings are compared in `corpus/lolwut.txt`).

mod common;
use common::*;

#[test]
fn schotter_fills_a_canvas_of_the_asked_size() {
    let s = start();
    let mut c = conn(&s);
    let art: String = q(&mut c, &["LOLWUT", "VERSION", "5", "30", "5", "6"]);
    let lines: Vec<&str> = art.lines().collect();
    // 60 pixels wide: 56 drawn over 5 squares, 11.2 each; 6 rows of them
    // and the padding make 71 pixel rows, 18 lines of braille (the last
    // one ends with its own line break, as Redis's does, then the title).
    assert_eq!(lines.len(), 18 + 2, "{art}");
    assert!(lines[..18].iter().all(|l| l.chars().count() == 30));
    assert_eq!(lines[18], "");
    assert_eq!(lines[19], "Georg Nees - schotter, plotter on paper, 1968. Redis ver. 7.0.15");
}

#[test]
fn the_skyline_has_one_coloured_cell_per_column_and_row() {
    let s = start();
    let mut c = conn(&s);
    let art: String = q(&mut c, &["LOLWUT", "VERSION", "6", "40", "10"]);
    let lines: Vec<&str> = art.lines().collect();
    assert_eq!(lines.len(), 12);
    assert!(lines[..10].iter().all(|l| l.matches("\x1b[0m").count() == 40));
    assert!(lines[11].ends_with("Redis ver. 7.0.15"));
}

#[test]
fn without_a_known_version_lolwut_names_the_redis_version() {
    let s = start();
    let mut c = conn(&s);
    assert_eq!(q::<String>(&mut c, &["LOLWUT"]), "Redis ver. 7.0.15\n");
    assert_eq!(q::<String>(&mut c, &["LOLWUT", "VERSION", "7"]), "Redis ver. 7.0.15\n");
}
