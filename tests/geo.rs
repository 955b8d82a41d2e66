//! Geo commands over TCP: a few behaviours spelled out with the `redis`
//! crate, and a differential property test that fills a geo set with
//! random points (clustered around real places, the poles' limits and the
//! antimeridian, some on the same spot so distances tie) and runs random
//! searches (GEOSEARCH by radius and box from a point or a member,
//! GEORADIUS, GEORADIUSBYMEMBER, every unit, order, COUNT [ANY] and WITH*
//! option, STORE / STOREDIST read back with ZRANGE) against keylock and a
//! real redis-server, requiring the same raw replies. Agreement over many
//! random radii is what shows the cell, step and distance arithmetic to be
//! Redis's: a point on the wrong side of a cell edge, or a distance one
//! ulp off, changes a reply.
//!
//! `KEYLOCK_GEO_CASES` sets the number of random cases (default
//! [`CASES`]). Without redis-server on PATH the differential test skips
//! with a message, unless KEYLOCK_REQUIRE_REDIS=1 makes that a failure.

mod common;
use common::*;

use proptest::prelude::*;

const CASES: u32 = 200;

#[test]
fn geoadd_stores_the_interleaved_geohash_as_the_score() {
    let s = start();
    let mut c = conn(&s);
    let added: i64 = q(&mut c, &["GEOADD", "Sicily", "13.361389", "38.115556", "Palermo"]);
    assert_eq!(added, 1);
    let score: String = q(&mut c, &["ZSCORE", "Sicily", "Palermo"]);
    assert_eq!(score, "3479099956230698");
}

#[test]
fn geopos_prints_the_cell_centre_with_seventeen_decimals_trimmed() {
    let s = start();
    let mut c = conn(&s);
    let _: i64 = q(&mut c, &["GEOADD", "Sicily", "13.361389", "38.115556", "Palermo"]);
    let pos: Vec<Vec<String>> = q(&mut c, &["GEOPOS", "Sicily", "Palermo"]);
    assert_eq!(pos, [["13.36138933897018433", "38.11555639549629859"]]);
}

#[test]
fn geodist_between_palermo_and_catania_in_kilometers() {
    let s = start();
    let mut c = conn(&s);
    let _: i64 = q(
        &mut c,
        &[
            "GEOADD",
            "Sicily",
            "13.361389",
            "38.115556",
            "Palermo",
            "15.087269",
            "37.502669",
            "Catania",
        ],
    );
    let d: String = q(&mut c, &["GEODIST", "Sicily", "Palermo", "Catania", "km"]);
    assert_eq!(d, "166.2742");
}

#[test]
fn geoadd_out_of_range_names_the_pair_as_printf_does() {
    let s = start();
    let mut c = conn(&s);
    let e = q_err(&mut c, &["GEOADD", "k", "200", "100", "m"]);
    assert_eq!(e, "ERR invalid longitude,latitude pair 200.000000,100.000000");
}

#[test]
fn geosearchstore_with_an_empty_result_deletes_the_destination() {
    let s = start();
    let mut c = conn(&s);
    let _: i64 = q(&mut c, &["GEOADD", "src", "0", "0", "a"]);
    let _: () = q(&mut c, &["SET", "dst", "v"]);
    let n: i64 = q(
        &mut c,
        &["GEOSEARCHSTORE", "dst", "src", "FROMLONLAT", "50", "50", "BYRADIUS", "1", "km"],
    );
    assert_eq!(n, 0);
    let exists: i64 = q(&mut c, &["EXISTS", "dst"]);
    assert_eq!(exists, 0);
}

/// Runs a scenario of several connections against keylock and against
/// redis-server and requires the same replies.
fn same_as_redis(scenario: fn(std::net::SocketAddr) -> Vec<Vec<u8>>) {
    let Some(redis) = real_redis() else { return };
    let keylock = start();
    let show = |r: Vec<Vec<u8>>| r.into_iter().map(|b| String::from_utf8_lossy(&b).into_owned()).collect::<Vec<_>>();
    assert_eq!(
        show(scenario(keylock.addr())),
        show(scenario(redis.addr)),
        "keylock (left) and redis-server (right)"
    );
}

#[test]
fn geoadd_serves_a_client_blocked_on_the_sorted_set() {
    same_as_redis(|addr| {
        let (mut blocked, mut writer) = (Raw::connect(addr), Raw::connect(addr));
        blocked.send_cmd(&[b"BZPOPMIN", b"g", b"0"]);
        std::thread::sleep(std::time::Duration::from_millis(100));
        let added = writer.call(&["GEOADD", "g", "13.361389", "38.115556", "Palermo"]);
        vec![added, blocked.reply(), writer.call(&["EXISTS", "g"])]
    });
}

#[test]
fn geoadd_breaks_a_watch_only_when_it_changes_the_set() {
    same_as_redis(|addr| {
        let (mut c, mut other) = (Raw::connect(addr), Raw::connect(addr));
        let mut out = vec![c.call(&["GEOADD", "g", "13.361389", "38.115556", "Palermo"])];
        for write in [
            &["GEOADD", "g", "XX", "1", "1", "nosuch"][..],
            &["GEOADD", "g", "CH", "13.361389", "38.115556", "Palermo"],
            &["GEOADD", "g", "NX", "1", "1", "Palermo"],
            &["GEOADD", "g", "1", "1", "Other"],
        ] {
            c.call(&["WATCH", "g"]);
            out.push(other.call(write));
            c.call(&["MULTI"]);
            c.call(&["PING"]);
            out.push(c.call(&["EXEC"]));
        }
        out
    });
}

/// Places points cluster around: cities, the map's corners and edges.
const CENTRES: &[(f64, f64)] = &[
    (13.361389, 38.115556),
    (-0.1275, 51.507222),
    (139.691706, 35.689487),
    (-74.005974, 40.712776),
    (151.209296, -33.86882),
    (0.0, 0.0),
    (180.0, 0.0),
    (-180.0, 0.0),
    (179.9, -17.0),
    (-179.9, 65.0),
    (0.0, 85.05112878),
    (0.0, -85.05112878),
    (45.0, 80.5),
    (-120.0, -70.0),
    (100.0, 66.5),
];

fn clamp(lon: f64, lat: f64) -> (f64, f64) {
    (lon.clamp(-180.0, 180.0), lat.clamp(-85.05112878, 85.05112878))
}

/// A point near one of the centres, at a random scale, or anywhere.
fn point() -> impl Strategy<Value = (f64, f64)> {
    prop_oneof![
        4 => (0..CENTRES.len(), 0u32..6, -1.0f64..1.0, -1.0f64..1.0).prop_map(|(c, scale, dx, dy)| {
            let (lon, lat) = CENTRES[c];
            let s = 10f64.powi(-(scale as i32));
            clamp(lon + dx * s * 2.0, lat + dy * s)
        }),
        1 => (-180.0f64..=180.0, -85.05112878f64..=85.05112878),
    ]
}

/// A coordinate as a client writes it: rounded to a few decimals, or in full.
fn coord_text(v: f64, digits: u8) -> String {
    match digits {
        0 => format!("{v}"),
        d => format!("{v:.*}", d as usize),
    }
}

fn unit() -> impl Strategy<Value = &'static str> {
    prop_oneof![Just("m"), Just("km"), Just("mi"), Just("ft"), Just("KM")]
}

/// A length in `unit` spanning meters to half the planet.
fn length() -> impl Strategy<Value = String> {
    prop_oneof![
        8 => (-2i32..7, 1.0f64..10.0).prop_map(|(e, m)| format!("{:.3}", m * 10f64.powi(e))),
        1 => Just("0".to_string()),
        1 => (1u32..30000).prop_map(|n| n.to_string()),
    ]
}

/// The options after the area: WITH*, order, COUNT [ANY], in a random order.
fn options(store: bool) -> impl Strategy<Value = Vec<String>> {
    (
        any::<[bool; 3]>(),
        0u8..3,
        prop::option::of((1u32..12, any::<bool>())),
        any::<bool>(),
    )
        .prop_map(move |(with, order, count, swap)| {
            let mut opts: Vec<Vec<String>> = Vec::new();
            if !store {
                for (on, name) in with.iter().zip(["WITHDIST", "WITHCOORD", "WITHHASH"]) {
                    if *on {
                        opts.push(vec![name.to_string()]);
                    }
                }
            }
            match order {
                1 => opts.push(vec!["ASC".into()]),
                2 => opts.push(vec!["DESC".into()]),
                _ => {}
            }
            if let Some((n, any)) = count {
                let mut c = vec!["COUNT".to_string(), n.to_string()];
                if any {
                    c.push("ANY".into());
                }
                opts.push(c);
            }
            if swap {
                opts.reverse();
            }
            opts.concat()
        })
}

/// One search (or a read) against the set `g` of `n` members `p0…`.
fn command(n: usize) -> impl Strategy<Value = Vec<Vec<String>>> {
    let member = (0..n).prop_map(|i| format!("p{i}"));
    let from = prop_oneof![
        member.clone().prop_map(|m| vec!["FROMMEMBER".to_string(), m]),
        (point(), 0u8..7).prop_map(|((lon, lat), d)| vec!["FROMLONLAT".to_string(), coord_text(lon, d), coord_text(lat, d)]),
    ];
    let by = prop_oneof![
        (length(), unit()).prop_map(|(r, u)| vec!["BYRADIUS".to_string(), r, u.to_string()]),
        (length(), length(), unit()).prop_map(|(w, h, u)| vec!["BYBOX".to_string(), w, h, u.to_string()]),
    ];
    prop_oneof![
        4 => (from.clone(), by.clone(), options(false)).prop_map(move |(f, b, o)| {
            vec![[words(&["GEOSEARCH", "g"]), f, b, o].concat()]
        }),
        2 => (from, by, options(true), any::<bool>()).prop_map(move |(f, b, o, dist)| {
            let mut cmd = [words(&["GEOSEARCHSTORE", "dst", "g"]), f, b, o].concat();
            if dist {
                cmd.push("STOREDIST".into());
            }
            vec![cmd, words(&["ZRANGE", "dst", "0", "-1", "WITHSCORES"])]
        }),
        2 => (point(), 0u8..7, length(), unit(), options(false)).prop_map(move |((lon, lat), d, r, u, o)| {
            vec![[words(&["GEORADIUS", "g"]), vec![coord_text(lon, d), coord_text(lat, d), r, u.to_string()], o].concat()]
        }),
        1 => (member.clone(), length(), unit(), options(true), any::<bool>()).prop_map(|(m, r, u, o, dist)| {
            let store = if dist { "STOREDIST" } else { "STORE" };
            vec![
                [words(&["GEORADIUSBYMEMBER", "g"]), vec![m, r, u.to_string()], o, words(&[store, "dst"])].concat(),
                words(&["ZRANGE", "dst", "0", "-1", "WITHSCORES"]),
            ]
        }),
        1 => (member.clone(), member.clone(), unit()).prop_map(|(a, b, u)| vec![words(&["GEODIST", "g", &a, &b, u])]),
        1 => prop::collection::vec(member, 1..4).prop_map(|ms| {
            vec![[words(&["GEOPOS", "g"]), ms.clone()].concat(), [words(&["GEOHASH", "g"]), ms].concat()]
        }),
    ]
}

/// A case: points to add (as GEOADD writes them) and commands to run.
fn case() -> impl Strategy<Value = (bool, Vec<Vec<String>>, Vec<Vec<String>>)> {
    (any::<bool>(), prop::collection::vec((point(), 0u8..7, any::<bool>()), 1..80)).prop_flat_map(|(resp3, points)| {
        let n = points.len();
        let mut adds = Vec::new();
        let mut previous: Option<(String, String)> = None;
        for (i, ((lon, lat), digits, repeat)) in points.into_iter().enumerate() {
            // Some points sit exactly where the previous one does.
            let (x, y) = match (&previous, repeat) {
                (Some(p), true) => p.clone(),
                _ => (coord_text(lon, digits), coord_text(lat, digits)),
            };
            previous = Some((x.clone(), y.clone()));
            adds.push(vec!["GEOADD".to_string(), "g".to_string(), x, y, format!("p{i}")]);
        }
        (
            Just(resp3),
            Just(adds),
            prop::collection::vec(command(n), 1..15).prop_map(|cmds| cmds.concat()),
        )
    })
}

#[test]
fn random_geo_searches_answer_as_redis() {
    let Some(redis) = real_redis() else { return };
    let keylock = start();
    let mut ours = Raw::connect(keylock.addr());
    let mut theirs = Raw::connect(redis.addr);
    let mut runner = case_runner("KEYLOCK_GEO_CASES", CASES);
    let servers = std::cell::RefCell::new((&mut ours, &mut theirs));
    let result = runner.run(&case(), |(resp3, adds, commands)| {
        let mut servers = servers.borrow_mut();
        let (ours, theirs) = &mut *servers;
        for c in [&mut **ours, &mut **theirs] {
            c.call_words(&["HELLO".into(), if resp3 { "3" } else { "2" }.into()]);
            c.call_words(&["FLUSHALL".into()]);
        }
        let check = vec!["ZRANGE".to_string(), "g".into(), "0".into(), "-1".into(), "WITHSCORES".into()];
        for words in adds.iter().chain(std::iter::once(&check)).chain(&commands) {
            let want = theirs.call_words(words);
            let got = ours.call_words(words);
            prop_assert_eq!(
                String::from_utf8_lossy(&got),
                String::from_utf8_lossy(&want),
                "{:?} (RESP{})",
                words,
                if resp3 { 3 } else { 2 }
            );
        }
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
}
