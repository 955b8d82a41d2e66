//! LOLWUT [VERSION v] [args…] (Redis's lolwut.c, lolwut5.c, lolwut6.c).
//!
//! Redis 7.0 has no art of its own: by default, and for a version that is
//! neither 5 nor 6, LOLWUT answers `Redis ver. 7.0.15`. VERSION 5 draws
//! Georg Nees's "Schotter" in braille characters, VERSION 6 a skyline in
//! terminal colours, as Redis draws them: the same canvas sizes, float
//! arithmetic (C's `float` is `f32` here) and line drawing. Both take
//! their randomness from C's `rand()` in Redis, seeded per process; here
//! from a generator with `rand()`'s range, so drawings that use none (the
//! first two rows of squares of Schotter) are Redis's byte for byte, and
//! the others are drawn the same way from different dice.

use bytes::Bytes;

use super::args::parse_i64;
use super::table::{CommandSpec, cmd, flag::*};
use super::{CmdResult, Ctx, Reply};

pub const COMMANDS: &[CommandSpec] = &[cmd("lolwut", -1, lolwut).flags(READONLY | FAST)];

/// C's `RAND_MAX` with glibc.
const RAND_MAX: i32 = i32::MAX;

fn rand() -> i32 {
    fastrand::i32(0..=RAND_MAX)
}

fn lolwut(_ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let mut version = crate::REDIS_VERSION.to_string();
    let mut args = argv;
    if argv.len() >= 3 && argv[1].eq_ignore_ascii_case(b"version") {
        let v = parse_i64(&argv[2])?;
        version = format!("{}.0.0", v as u32);
        args = &argv[2..];
    }
    let v = version.as_bytes();
    let at = |i: usize| v.get(i).copied().unwrap_or(0);
    let text = if (at(0) == b'5' && at(1) == b'.' && at(2) != b'9') || (at(0) == b'4' && at(1) == b'.' && at(2) == b'9') {
        lolwut5(args)?
    } else if (at(0) == b'6' && at(1) == b'.' && at(2) != b'9') || (at(0) == b'5' && at(1) == b'.' && at(2) == b'9') {
        lolwut6(args)?
    } else {
        format!("Redis ver. {}\n", crate::REDIS_VERSION).into_bytes()
    };
    Ok(Reply::verbatim_txt(text))
}

/// The optional integer argument `i` (after the command name), or `default`.
fn arg_or(args: &[Bytes], i: usize, default: i64) -> CmdResult<i64> {
    match args.get(i) {
        Some(a) => parse_i64(a),
        None => Ok(default),
    }
}

/// `lwCanvas`: one byte per pixel.
struct Canvas {
    width: i32,
    height: i32,
    pixels: Vec<u8>,
}

impl Canvas {
    fn new(width: i32, height: i32, color: u8) -> Canvas {
        Canvas {
            width,
            height,
            pixels: vec![color; (width.max(0) as usize) * (height.max(0) as usize)],
        }
    }

    fn draw(&mut self, x: i32, y: i32, color: u8) {
        if x < 0 || x >= self.width || y < 0 || y >= self.height {
            return;
        }
        self.pixels[(x + y * self.width) as usize] = color;
    }

    fn get(&self, x: i32, y: i32) -> u8 {
        if x < 0 || x >= self.width || y < 0 || y >= self.height {
            return 0;
        }
        self.pixels[(x + y * self.width) as usize]
    }

    /// `lwDrawLine`: Bresenham.
    fn line(&mut self, mut x1: i32, mut y1: i32, x2: i32, y2: i32, color: u8) {
        let dx = (x2 - x1).abs();
        let dy = (y2 - y1).abs();
        let sx = if x1 < x2 { 1 } else { -1 };
        let sy = if y1 < y2 { 1 } else { -1 };
        let mut err = dx - dy;
        loop {
            self.draw(x1, y1, color);
            if x1 == x2 && y1 == y2 {
                break;
            }
            let e2 = err * 2;
            if e2 > -dy {
                err -= dy;
                x1 += sx;
            }
            if e2 < dx {
                err += dx;
                y1 += sy;
            }
        }
    }

    /// `lwDrawSquare`, with C's mix of float and double arithmetic.
    fn square(&mut self, x: i32, y: i32, size: f32, angle: f32, color: u8) {
        // Redis divides by this truncated constant, not by the exact root.
        #[allow(clippy::approx_constant)]
        const REDIS_SQRT_2: f64 = 1.4142135623;
        let mut size = (size as f64 / REDIS_SQRT_2) as f32;
        size = (size as f64).round() as f32;
        let mut px = [0i32; 4];
        let mut py = [0i32; 4];
        let mut k = (std::f64::consts::PI / 4.0 + angle as f64) as f32;
        for j in 0..4 {
            px[j] = ((k as f64).sin() * size as f64 + x as f64).round() as i32;
            py[j] = ((k as f64).cos() * size as f64 + y as f64).round() as i32;
            k = (k as f64 + std::f64::consts::PI / 2.0) as f32;
        }
        for j in 0..4 {
            self.line(px[j], py[j], px[(j + 1) % 4], py[(j + 1) % 4], color);
        }
    }
}

/// LOLWUT VERSION 5 [cols] [squares-per-row] [squares-per-col].
fn lolwut5(args: &[Bytes]) -> CmdResult<Vec<u8>> {
    let cols = arg_or(args, 1, 66)?.clamp(1, 1000) as i32;
    let per_row = arg_or(args, 2, 8)?.clamp(1, 200) as i32;
    let per_col = arg_or(args, 3, 12)?.clamp(1, 200) as i32;
    let canvas = schotter(cols, per_row, per_col);
    let mut text = Vec::new();
    let mut y = 0;
    while y < canvas.height {
        let mut x = 0;
        while x < canvas.width {
            let mut byte = 0u32;
            let bits = [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2), (0, 3), (1, 3)];
            for (bit, (dx, dy)) in bits.iter().enumerate() {
                if canvas.get(x + dx, y + dy) != 0 {
                    byte |= 1 << bit;
                }
            }
            let code = 0x2800 + byte;
            text.extend_from_slice(&[
                (0xE0 | (code >> 12)) as u8,
                (0x80 | ((code >> 6) & 0x3F)) as u8,
                (0x80 | (code & 0x3F)) as u8,
            ]);
            x += 2;
        }
        if y != canvas.height - 1 {
            text.push(b'\n');
        }
        y += 4;
    }
    text.extend_from_slice(b"\nGeorg Nees - schotter, plotter on paper, 1968. Redis ver. ");
    text.extend_from_slice(crate::REDIS_VERSION.as_bytes());
    text.push(b'\n');
    Ok(text)
}

/// `lwDrawSchotter`.
fn schotter(console_cols: i32, per_row: i32, per_col: i32) -> Canvas {
    let width = console_cols * 2;
    let padding = if width > 4 { 2 } else { 0 };
    let side = (width - padding * 2) as f32 / per_row as f32;
    let height = (side * per_col as f32 + (padding * 2) as f32) as i32;
    let mut canvas = Canvas::new(width, height, 0);
    for y in 0..per_col {
        for x in 0..per_row {
            let mut sx = (x as f32 * side + side / 2.0 + padding as f32) as i32;
            let mut sy = (y as f32 * side + side / 2.0 + padding as f32) as i32;
            let mut angle = 0f32;
            if y > 1 {
                let mut r1 = rand() as f32 / RAND_MAX as f32 / per_col as f32 * y as f32;
                let mut r2 = rand() as f32 / RAND_MAX as f32 / per_col as f32 * y as f32;
                let mut r3 = rand() as f32 / RAND_MAX as f32 / per_col as f32 * y as f32;
                if rand() % 2 != 0 {
                    r1 = -r1;
                }
                if rand() % 2 != 0 {
                    r2 = -r2;
                }
                if rand() % 2 != 0 {
                    r3 = -r3;
                }
                angle = r1;
                sx = (sx as f32 + r2 * side / 3.0) as i32;
                sy = (sy as f32 + r3 * side / 3.0) as i32;
            }
            canvas.square(sx, sy, side, angle, 1);
        }
    }
    canvas
}

/// LOLWUT VERSION 6 [cols] [rows].
fn lolwut6(args: &[Bytes]) -> CmdResult<Vec<u8>> {
    let cols = arg_or(args, 1, 80)?.clamp(1, 1000) as i32;
    let rows = arg_or(args, 2, 20)?.clamp(1, 1000) as i32;
    let mut canvas = Canvas::new(cols, rows, 3);
    skyline(&mut canvas);
    let mut text = Vec::new();
    for y in 0..canvas.height {
        for x in 0..canvas.width {
            let escape: &[u8] = match canvas.get(x, y) {
                1 => b"0;90;100m",
                2 => b"0;37;47m",
                3 => b"0;97;107m",
                _ => b"0;30;40m",
            };
            text.extend_from_slice(b"\x1b[");
            text.extend_from_slice(escape);
            text.extend_from_slice(b" \x1b[0m");
        }
        if y != canvas.height - 1 {
            text.push(b'\n');
        }
    }
    text.extend_from_slice(
        b"\nDedicated to the 8 bit game developers of past and present.\nOriginal 8 bit image from Plaguemon by hikikomori. Redis ver. ",
    );
    text.extend_from_slice(crate::REDIS_VERSION.as_bytes());
    text.push(b'\n');
    Ok(text)
}

/// `struct skyscraper`.
struct Skyscraper {
    xoff: i32,
    width: i32,
    height: i32,
    windows: bool,
    color: u8,
}

/// `generateSkyscraper`.
fn skyscraper(canvas: &mut Canvas, si: &Skyscraper) {
    let starty = canvas.height - 1;
    let endy = starty - si.height + 1;
    let mut y = starty;
    while y >= endy {
        for x in si.xoff..si.xoff + si.width {
            if y == endy && (x <= si.xoff + 1 || x >= si.xoff + si.width - 2) {
                continue;
            }
            let mut color = si.color;
            if si.windows && x > si.xoff + 1 && x < si.xoff + si.width - 2 && y > endy + 1 && y < starty - 1 {
                let relx = x - (si.xoff + 1);
                let rely = y - (endy + 1);
                if (relx / 2) % 2 != 0 && rely % 2 != 0 {
                    loop {
                        color = (1 + rand() % 2) as u8;
                        if color != si.color {
                            break;
                        }
                    }
                    if relx % 2 != 0 {
                        color = canvas.get(x - 1, y);
                    }
                }
            }
            canvas.draw(x, y, color);
        }
        y -= 1;
    }
}

/// `generateSkyline`.
fn skyline(canvas: &mut Canvas) {
    let (w, h) = (canvas.width, canvas.height);
    for color in [2u8, 1] {
        let mut offset = -10;
        while offset < w {
            offset += rand() % 8;
            let width = 10 + rand() % 9;
            let height = if color == 2 {
                h / 2 + (rand() % h) / 2
            } else {
                h / 2 + (rand() % h) / 3
            };
            let si = Skyscraper {
                xoff: offset,
                width,
                height,
                windows: false,
                color,
            };
            skyscraper(canvas, &si);
            offset += if color == 2 { width / 2 } else { width + 1 };
        }
    }
    let mut offset = -10;
    while offset < w {
        offset += rand() % 8;
        let mut width = 5 + rand() % 14;
        if width % 4 != 0 {
            width += width % 3;
        }
        let height = h / 3 + (rand() % h) / 2;
        let si = Skyscraper {
            xoff: offset,
            width,
            height,
            windows: true,
            color: 0,
        };
        skyscraper(canvas, &si);
        offset += width + 5;
    }
}
