//! Geo commands: GEOADD, GEODIST, GEOHASH, GEOPOS, GEORADIUS,
//! GEORADIUSBYMEMBER and their `_RO` forms, GEOSEARCH and GEOSEARCHSTORE.
//!
//! A geo set is a sorted set whose scores are 52-bit interleaved geohashes
//! (`geohash.rs` holds the arithmetic). GEOADD turns its triples into a
//! ZADD and runs ZADD's own code, as Redis does, so WATCH, keyspace events
//! (`zadd`) and blocked ZPOP clients see a ZADD. The searches follow
//! Redis's `georadiusGeneric` in its argument order (the first bad
//! argument names the error), visit the nine cells Redis visits, keep the
//! points Redis's distance test keeps, and order them with the same sorts
//! (`csort.rs`), so replies match byte for byte: distances with four
//! decimals (`fixedpoint_d2string`), coordinates as `%.17Lf` trimmed.
//! Results stored by STORE / STOREDIST / GEOSEARCHSTORE go through the
//! sorted-set store (`georadiusstore` / `geosearchstore` events).

use bytes::Bytes;

use super::args::{c_keyword, parse_f64, parse_i64};
use super::table::{CommandSpec, cmd, flag::*};
use super::zsets::{store_zset, zadd_generic};
use super::{CmdError, CmdResult, Ctx, Reply};
use crate::csort;
use crate::db::zset::{ScoreBound, ZSet};
use crate::db::{Value, typed};
use crate::geohash::{self, Search, Shape};

pub const COMMANDS: &[CommandSpec] = &[
    cmd("geoadd", -5, geoadd).flags(WRITE | DENYOOM),
    cmd("geodist", -4, geodist).flags(READONLY),
    cmd("geohash", -2, geohash).flags(READONLY),
    cmd("geopos", -2, geopos).flags(READONLY),
    cmd("georadius", -6, georadius).flags(WRITE | DENYOOM),
    cmd("georadiusbymember", -5, georadiusbymember).flags(WRITE | DENYOOM),
    cmd("georadius_ro", -6, georadius_ro).flags(READONLY),
    cmd("georadiusbymember_ro", -5, georadiusbymember_ro).flags(READONLY),
    cmd("geosearch", -7, geosearch).flags(READONLY),
    cmd("geosearchstore", -8, geosearchstore).flags(WRITE | DENYOOM),
];

// ---------------------------------------------------------------------------
// Argument helpers

/// Redis's `extractLongLatOrReply`.
fn parse_lonlat(lon: &[u8], lat: &[u8]) -> CmdResult<[f64; 2]> {
    let (lon, lat) = (parse_f64(lon)?, parse_f64(lat)?);
    if !(geohash::LONG_MIN..=geohash::LONG_MAX).contains(&lon) || !(geohash::LAT_MIN..=geohash::LAT_MAX).contains(&lat) {
        return Err(CmdError::geo_coordinates(lon, lat));
    }
    Ok([lon, lat])
}

/// Redis's `extractUnitOrReply`: meters per unit.
fn parse_unit(raw: &[u8]) -> CmdResult<f64> {
    [("m", 1.0), ("km", 1000.0), ("ft", 0.3048), ("mi", 1609.34)]
        .into_iter()
        .find(|(name, _)| c_keyword(raw, name))
        .map(|(_, meters)| meters)
        .ok_or_else(CmdError::geo_unit)
}

/// A non-negative length, with its own "need numeric …" message.
fn parse_length(raw: &[u8], what: &str) -> CmdResult<f64> {
    crate::numfmt::parse_f64(raw).ok_or_else(|| CmdError::geo_need_numeric(what))
}

/// Redis's `extractDistanceOrReply`: (meters per unit, radius).
fn parse_radius(radius: &[u8], unit: &[u8]) -> CmdResult<(f64, f64)> {
    let r = parse_length(radius, "radius")?;
    if r < 0.0 {
        return Err(CmdError::err("radius cannot be negative"));
    }
    Ok((parse_unit(unit)?, r))
}

/// Redis's `extractBoxOrReply`: (meters per unit, width, height).
fn parse_box(width: &[u8], height: &[u8], unit: &[u8]) -> CmdResult<(f64, f64, f64)> {
    let w = parse_length(width, "width")?;
    let h = parse_length(height, "height")?;
    if h < 0.0 || w < 0.0 {
        return Err(CmdError::err("height or width cannot be negative"));
    }
    Ok((parse_unit(unit)?, w, h))
}

/// The decoded position of `member`, if the set holds it.
fn member_point(z: &ZSet, member: &[u8]) -> Option<[f64; 2]> {
    z.score(member).map(geohash::decode_score)
}

/// Redis's `fixedpoint_d2string(…, 4)`: the distance rounded with
/// `llrint` to four decimals.
fn distance_text(d: f64) -> Bytes {
    if d == 0.0 {
        return Bytes::from_static(b"0.0000");
    }
    let scaled = (d * 10000.0).round_ties_even();
    // `llrint` of a value a `long long` cannot hold is LLONG_MIN on x86.
    const TWO63: f64 = 9_223_372_036_854_775_808.0;
    let svalue = if scaled.is_nan() || !(-TWO63..TWO63).contains(&scaled) {
        i64::MIN
    } else {
        scaled as i64
    };
    let value = svalue.unsigned_abs();
    let sign = if svalue < 0 { "-" } else { "" };
    Bytes::from(format!("{sign}{}.{:04}", value / 10000, value % 10000))
}

fn read_geo<'a>(ctx: &'a mut Ctx, key: &[u8]) -> CmdResult<Option<&'a ZSet>> {
    typed(ctx.read(key), Value::as_zset)
}

// ---------------------------------------------------------------------------
// GEOADD, GEODIST, GEOHASH, GEOPOS

/// GEOADD key [NX|XX] [CH] longitude latitude member [...]: checked as
/// Redis checks it, then run as `ZADD key [options] score member ...`.
fn geoadd(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let mut longidx = 2;
    let (mut nx, mut xx) = (false, false);
    while longidx < argv.len() {
        let opt = &argv[longidx];
        if c_keyword(opt, "nx") {
            nx = true;
        } else if c_keyword(opt, "xx") {
            xx = true;
        } else if !c_keyword(opt, "ch") {
            break;
        }
        longidx += 1;
    }
    if !(argv.len() - longidx).is_multiple_of(3) || (xx && nx) {
        return Err(CmdError::syntax());
    }
    let mut zadd_argv: Vec<Bytes> = Vec::with_capacity(longidx + (argv.len() - longidx) / 3 * 2);
    zadd_argv.push(Bytes::from_static(b"zadd"));
    zadd_argv.extend_from_slice(&argv[1..longidx]);
    for triple in argv[longidx..].chunks(3) {
        let [lon, lat] = parse_lonlat(&triple[0], &triple[1])?;
        let score = geohash::score_of(lon, lat);
        zadd_argv.push(Bytes::from(score.to_string()));
        zadd_argv.push(triple[2].clone());
    }
    let reply = zadd_generic(ctx, &zadd_argv, false)?;
    // Replayed as the ZADD it is.
    ctx.propagate_as(zadd_argv);
    Ok(reply)
}

/// GEODIST key member1 member2 [unit].
fn geodist(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let to_meter = match argv.len() {
        5 => parse_unit(&argv[4])?,
        n if n > 5 => return Err(CmdError::syntax()),
        _ => 1.0,
    };
    let Some(z) = read_geo(ctx, &argv[1])? else {
        return Ok(Reply::Nil);
    };
    let (Some(a), Some(b)) = (member_point(z, &argv[2]), member_point(z, &argv[3])) else {
        return Ok(Reply::Nil);
    };
    Ok(Reply::Bulk(distance_text(geohash::distance(a[0], a[1], b[0], b[1]) / to_meter)))
}

/// GEOHASH key member [...]: an 11-character geohash per member, nil for
/// the ones missing.
fn geohash(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let z = read_geo(ctx, &argv[1])?;
    Ok(Reply::Array(
        argv[2..]
            .iter()
            .map(|m| match z.and_then(|z| z.score(m)) {
                Some(score) => Reply::Bulk(Bytes::copy_from_slice(&geohash::standard_geohash(score))),
                None => Reply::Nil,
            })
            .collect(),
    ))
}

/// GEOPOS key member [...]: `[longitude, latitude]` per member, a nil
/// array for the ones missing.
fn geopos(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let z = read_geo(ctx, &argv[1])?;
    Ok(Reply::Array(
        argv[2..]
            .iter()
            .map(|m| match z.and_then(|z| member_point(z, m)) {
                Some([lon, lat]) => Reply::Array(vec![Reply::HumanDouble(lon), Reply::HumanDouble(lat)]),
                None => Reply::NilArray,
            })
            .collect(),
    ))
}

// ---------------------------------------------------------------------------
// Searches

/// Which search command is running (Redis's RADIUS_* / GEOSEARCH flags).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Origin {
    /// GEORADIUS: a point and a radius at fixed positions.
    Coords,
    /// GEORADIUSBYMEMBER: a member and a radius at fixed positions.
    Member,
    /// GEOSEARCH / GEOSEARCHSTORE: FROM… and BY… options.
    Search,
}

#[derive(Clone, Copy)]
struct Variant {
    origin: Origin,
    /// The `_RO` forms: no STORE / STOREDIST.
    no_store: bool,
    /// GEOSEARCHSTORE: the destination is argv[1].
    search_store: bool,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Order {
    None,
    Asc,
    Desc,
}

/// One point found, as Redis's `geoPoint`.
#[derive(Clone)]
struct Found {
    xy: [f64; 2],
    dist: f64,
    score: f64,
    member: Bytes,
}

/// Redis's `membersOfAllNeighbors`: the points of `z` inside `search`,
/// cell by cell; with `limit` (COUNT … ANY) it stops once it has that many.
fn points_within(z: &ZSet, search: &Search, limit: usize) -> Vec<Found> {
    let cells = search.cells();
    let mut found = Vec::new();
    let mut last_processed = 0;
    for (i, cell) in cells.iter().enumerate() {
        if cell.is_zero() {
            continue;
        }
        // Huge radii make neighbours repeat; Redis skips a cell equal to
        // the last one it searched (the centre never counts as that).
        if last_processed != 0 && *cell == cells[last_processed] {
            continue;
        }
        if limit != 0 && found.len() >= limit {
            break;
        }
        let (min, max) = cell.score_range();
        let lo = ScoreBound {
            value: min as f64,
            exclusive: false,
        };
        let hi = ScoreBound {
            value: max as f64,
            exclusive: true,
        };
        for (member, score) in z.range_by_score(lo, hi) {
            let xy = geohash::decode_score(score);
            if let Some(dist) = search.distance_if_within(xy) {
                found.push(Found {
                    xy,
                    dist,
                    score,
                    member: member.clone(),
                });
            }
            if limit != 0 && found.len() >= limit {
                break;
            }
        }
        last_processed = i;
    }
    found
}

fn by_distance(a: &Found, b: &Found) -> i32 {
    if a.dist > b.dist {
        1
    } else if a.dist == b.dist {
        0
    } else {
        -1
    }
}

/// Redis's `georadiusGeneric`: the source key at `argv[src_index]`.
fn search_generic(ctx: &mut Ctx, argv: &[Bytes], src_index: usize, v: Variant) -> CmdResult {
    let z = read_geo(ctx, &argv[src_index])?;

    let mut center = [0.0; 2];
    let mut conversion = 0.0;
    let mut shape = Shape::Circle { radius: 0.0 };
    let mut storekey: Option<&Bytes> = None;
    let mut storedist = false;
    let base = match v.origin {
        Origin::Coords => {
            center = parse_lonlat(&argv[2], &argv[3])?;
            let (c, radius) = parse_radius(&argv[4], &argv[5])?;
            (conversion, shape) = (c, Shape::Circle { radius });
            6
        }
        Origin::Member => {
            if let Some(z) = z {
                center = member_point(z, &argv[2]).ok_or_else(CmdError::geo_member)?;
                let (c, radius) = parse_radius(&argv[3], &argv[4])?;
                (conversion, shape) = (c, Shape::Circle { radius });
            }
            5
        }
        Origin::Search if v.search_store => {
            storekey = Some(&argv[1]);
            3
        }
        Origin::Search => 2,
    };

    let (mut withdist, mut withhash, mut withcoords) = (false, false, false);
    let (mut frommember, mut fromloc, mut byradius, mut bybox) = (false, false, false, false);
    let mut order = Order::None;
    let mut any = false;
    let mut count: i64 = 0;
    let search = v.origin == Origin::Search;
    let rest = &argv[base.min(argv.len())..];
    let remaining = rest.len();
    let mut i = 0;
    while i < remaining {
        let a = &rest[i];
        if c_keyword(a, "withdist") {
            withdist = true;
        } else if c_keyword(a, "withhash") {
            withhash = true;
        } else if c_keyword(a, "withcoord") {
            withcoords = true;
        } else if c_keyword(a, "any") {
            any = true;
        } else if c_keyword(a, "asc") {
            order = Order::Asc;
        } else if c_keyword(a, "desc") {
            order = Order::Desc;
        } else if c_keyword(a, "count") && i + 1 < remaining {
            count = parse_i64(&rest[i + 1])?;
            if count <= 0 {
                return Err(CmdError::err("COUNT must be > 0"));
            }
            i += 1;
        } else if c_keyword(a, "store") && i + 1 < remaining && !v.no_store && !search {
            storekey = Some(&rest[i + 1]);
            storedist = false;
            i += 1;
        } else if c_keyword(a, "storedist") && i + 1 < remaining && !v.no_store && !search {
            storekey = Some(&rest[i + 1]);
            storedist = true;
            i += 1;
        } else if c_keyword(a, "storedist") && search && v.search_store {
            storedist = true;
        } else if c_keyword(a, "frommember") && i + 1 < remaining && search && !fromloc {
            // Without a source key the member is not looked up: the
            // arguments are still checked, and the reply is empty.
            if let Some(z) = z {
                center = member_point(z, &rest[i + 1]).ok_or_else(CmdError::geo_member)?;
            }
            frommember = true;
            i += 1;
        } else if c_keyword(a, "fromlonlat") && i + 2 < remaining && search && !frommember {
            center = parse_lonlat(&rest[i + 1], &rest[i + 2])?;
            fromloc = true;
            i += 2;
        } else if c_keyword(a, "byradius") && i + 2 < remaining && search && !bybox {
            let (c, radius) = parse_radius(&rest[i + 1], &rest[i + 2])?;
            (conversion, shape) = (c, Shape::Circle { radius });
            byradius = true;
            i += 2;
        } else if c_keyword(a, "bybox") && i + 3 < remaining && search && !byradius {
            let (c, width, height) = parse_box(&rest[i + 1], &rest[i + 2], &rest[i + 3])?;
            (conversion, shape) = (c, Shape::Box { width, height });
            bybox = true;
            i += 3;
        } else {
            return Err(CmdError::syntax());
        }
        i += 1;
    }

    if storekey.is_some() && (withdist || withhash || withcoords) {
        let what = if v.search_store {
            "GEOSEARCHSTORE"
        } else {
            "STORE option in GEORADIUS"
        };
        return Err(CmdError::err(format!(
            "{what} is not compatible with WITHDIST, WITHHASH and WITHCOORD options"
        )));
    }
    let name = String::from_utf8_lossy(crate::error::c_str(&argv[0], usize::MAX)).into_owned();
    if search && !(frommember || fromloc) {
        return Err(CmdError::err(format!(
            "exactly one of FROMMEMBER or FROMLONLAT can be specified for {name}"
        )));
    }
    if search && !(byradius || bybox) {
        return Err(CmdError::err(format!(
            "exactly one of BYRADIUS and BYBOX can be specified for {name}"
        )));
    }
    if any && count == 0 {
        return Err(CmdError::err("the ANY argument requires COUNT argument"));
    }

    let event = if search { "geosearchstore" } else { "georadiusstore" };
    let Some(z) = z else {
        return match storekey {
            Some(dst) => {
                let dst = dst.clone();
                store_zset(ctx, &dst, ZSet::new_skiplist(), event)
            }
            None => Ok(Reply::Array(Vec::new())),
        };
    };
    if count != 0 && order == Order::None && !any {
        order = Order::Asc;
    }

    let search_area = Search { center, conversion, shape };
    let limit = if any { usize::try_from(count).unwrap_or(usize::MAX) } else { 0 };
    let mut found = points_within(z, &search_area, limit);

    let returned = if count == 0 {
        found.len()
    } else {
        found.len().min(usize::try_from(count).unwrap_or(usize::MAX))
    };
    if order != Order::None && !found.is_empty() {
        let desc = order == Order::Desc;
        let mut cmp = |a: &Found, b: &Found| if desc { -by_distance(a, b) } else { by_distance(a, b) };
        if returned == found.len() {
            csort::qsort(&mut found, &mut cmp);
        } else {
            csort::pqsort(&mut found, &mut cmp, 0, returned as i64 - 1);
        }
    }
    found.truncate(returned);

    match storekey {
        None => {
            let options = usize::from(withdist) + usize::from(withhash) + usize::from(withcoords);
            let items = found
                .into_iter()
                .map(|p| {
                    if options == 0 {
                        return Reply::Bulk(p.member);
                    }
                    let mut item = Vec::with_capacity(options + 1);
                    item.push(Reply::Bulk(p.member));
                    if withdist {
                        item.push(Reply::Bulk(distance_text(p.dist / conversion)));
                    }
                    if withhash {
                        item.push(Reply::Int(p.score as i64));
                    }
                    if withcoords {
                        item.push(Reply::Array(vec![Reply::HumanDouble(p.xy[0]), Reply::HumanDouble(p.xy[1])]));
                    }
                    Reply::Array(item)
                })
                .collect();
            Ok(Reply::Array(items))
        }
        Some(dst) => {
            let dst = dst.clone();
            let mut result = ZSet::new_skiplist();
            for p in found {
                let score = if storedist { p.dist / conversion } else { p.score };
                result.insert(p.member, score);
            }
            let stored = result.len() as u64;
            let reply = store_zset(ctx, &dst, result, event)?;
            if stored > 0 {
                // One change per member stored, as Redis counts them.
                ctx.dirty(stored);
            }
            Ok(reply)
        }
    }
}

const GEORADIUS: Variant = Variant {
    origin: Origin::Coords,
    no_store: false,
    search_store: false,
};
const GEORADIUSBYMEMBER: Variant = Variant {
    origin: Origin::Member,
    no_store: false,
    search_store: false,
};

fn georadius(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    search_generic(ctx, argv, 1, GEORADIUS)
}

fn georadiusbymember(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    search_generic(ctx, argv, 1, GEORADIUSBYMEMBER)
}

fn georadius_ro(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    search_generic(
        ctx,
        argv,
        1,
        Variant {
            no_store: true,
            ..GEORADIUS
        },
    )
}

fn georadiusbymember_ro(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    search_generic(
        ctx,
        argv,
        1,
        Variant {
            no_store: true,
            ..GEORADIUSBYMEMBER
        },
    )
}

fn geosearch(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let v = Variant {
        origin: Origin::Search,
        no_store: false,
        search_store: false,
    };
    search_generic(ctx, argv, 1, v)
}

fn geosearchstore(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let v = Variant {
        origin: Origin::Search,
        no_store: false,
        search_store: true,
    };
    search_generic(ctx, argv, 2, v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distances_print_with_four_decimals_as_redis() {
        assert_eq!(&distance_text(0.0)[..], b"0.0000");
        assert_eq!(&distance_text(166_274.151_569_6)[..], b"166274.1516");
        assert_eq!(&distance_text(0.5)[..], b"0.5000");
        assert_eq!(&distance_text(12.00004)[..], b"12.0000");
        assert_eq!(&distance_text(f64::NAN)[..], b"-922337203685477.5808");
    }
}
