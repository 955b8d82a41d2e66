//! Geohash arithmetic as Redis 7.0.15 does it (`geohash.c`,
//! `geohash_helper.c`): the 52-bit interleaved score of a point, its
//! decoding back to the centre of its cell, the nine cells a radius or box
//! search visits (with Redis's step estimation and its "decrease the step
//! when a neighbour is too near" rule), and the haversine distance with
//! Redis's earth radius.
//!
//! Every expression keeps the C code's operation order and types (the
//! `double` to `uint32_t` truncations, the clamping after decoding) so
//! that scores, decoded coordinates and distances are bit for bit Redis's:
//! the search result, its order and the printed digits all follow from
//! them. `sin`, `cos`, `asin` and `sqrt` are the C library's, as in Redis.
//! This module knows nothing of commands or sorted sets.

/// Bits per coordinate of a stored score (26 * 2 = 52).
pub const STEP_MAX: u8 = 26;

pub const LAT_MIN: f64 = -85.05112878;
pub const LAT_MAX: f64 = 85.05112878;
pub const LONG_MIN: f64 = -180.0;
pub const LONG_MAX: f64 = 180.0;

/// Redis's `EARTH_RADIUS_IN_METERS`.
const EARTH_RADIUS_IN_METERS: f64 = 6372797.560856;
const MERCATOR_MAX: f64 = 20037726.37;
/// Redis's `D_R` (`M_PI / 180.0`).
const D_R: f64 = std::f64::consts::PI / 180.0;

fn deg_rad(ang: f64) -> f64 {
    ang * D_R
}

fn rad_deg(ang: f64) -> f64 {
    ang / D_R
}

/// A cell: its interleaved bits and how many bits per coordinate.
/// `step == 0 && bits == 0` is Redis's "zero" cell, skipped by searches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HashBits {
    pub bits: u64,
    pub step: u8,
}

impl HashBits {
    const ZERO: HashBits = HashBits { bits: 0, step: 0 };

    pub fn is_zero(self) -> bool {
        self.bits == 0 && self.step == 0
    }

    /// The cell's bits shifted to 52 bits (`geohashAlign52Bits`).
    pub fn align52(self) -> u64 {
        self.bits << (52 - u32::from(self.step) * 2)
    }

    /// The scores `[min, max)` a cell covers in a sorted set.
    pub fn score_range(self) -> (u64, u64) {
        let next = HashBits {
            bits: self.bits.wrapping_add(1),
            step: self.step,
        };
        (self.align52(), next.align52())
    }
}

#[derive(Debug, Clone, Copy, Default)]
pub struct Range {
    pub min: f64,
    pub max: f64,
}

/// The area a cell covers.
#[derive(Debug, Clone, Copy, Default)]
pub struct Area {
    pub longitude: Range,
    pub latitude: Range,
}

const WGS84_LONG: Range = Range {
    min: LONG_MIN,
    max: LONG_MAX,
};
const WGS84_LAT: Range = Range {
    min: LAT_MIN,
    max: LAT_MAX,
};

fn interleave64(xlo: u32, ylo: u32) -> u64 {
    const B: [u64; 5] = [
        0x5555555555555555,
        0x3333333333333333,
        0x0F0F0F0F0F0F0F0F,
        0x00FF00FF00FF00FF,
        0x0000FFFF0000FFFF,
    ];
    const S: [u32; 5] = [1, 2, 4, 8, 16];
    let mut x = u64::from(xlo);
    let mut y = u64::from(ylo);
    for i in (0..5).rev() {
        x = (x | (x << S[i])) & B[i];
        y = (y | (y << S[i])) & B[i];
    }
    x | (y << 1)
}

fn deinterleave64(interleaved: u64) -> u64 {
    const B: [u64; 6] = [
        0x5555555555555555,
        0x3333333333333333,
        0x0F0F0F0F0F0F0F0F,
        0x00FF00FF00FF00FF,
        0x0000FFFF0000FFFF,
        0x00000000FFFFFFFF,
    ];
    const S: [u32; 6] = [0, 1, 2, 4, 8, 16];
    let mut x = interleaved;
    let mut y = interleaved >> 1;
    for i in 0..6 {
        x = (x | (x >> S[i])) & B[i];
        y = (y | (y >> S[i])) & B[i];
    }
    x | (y << 32)
}

/// `geohashEncode`: None where Redis returns 0 (outside the WGS84 limits
/// or the given ranges).
fn encode(long_range: Range, lat_range: Range, longitude: f64, latitude: f64, step: u8) -> Option<HashBits> {
    if step > 32 || step == 0 {
        return None;
    }
    if !(LONG_MIN..=LONG_MAX).contains(&longitude) || !(LAT_MIN..=LAT_MAX).contains(&latitude) {
        return None;
    }
    if latitude < lat_range.min || latitude > lat_range.max || longitude < long_range.min || longitude > long_range.max {
        return None;
    }
    let scale = (1u64 << step) as f64;
    let lat_offset = (latitude - lat_range.min) / (lat_range.max - lat_range.min) * scale;
    let long_offset = (longitude - long_range.min) / (long_range.max - long_range.min) * scale;
    Some(HashBits {
        bits: interleave64(lat_offset as u32, long_offset as u32),
        step,
    })
}

/// The cell of a point at `step` bits per coordinate, in Redis's
/// -85.05..85.05 latitude range.
pub fn encode_wgs84(longitude: f64, latitude: f64, step: u8) -> Option<HashBits> {
    encode(WGS84_LONG, WGS84_LAT, longitude, latitude, step)
}

/// The score GEOADD stores for a point (already checked to be in range).
pub fn score_of(longitude: f64, latitude: f64) -> u64 {
    encode_wgs84(longitude, latitude, STEP_MAX).map_or(0, HashBits::align52)
}

/// `geohashDecode`.
fn decode(long_range: Range, lat_range: Range, hash: HashBits) -> Option<Area> {
    if hash.is_zero() {
        return None;
    }
    let sep = deinterleave64(hash.bits);
    let lat_scale = lat_range.max - lat_range.min;
    let long_scale = long_range.max - long_range.min;
    let ilato = sep as u32;
    let ilono = (sep >> 32) as u32;
    let div = (1u64 << hash.step) as f64;
    Some(Area {
        latitude: Range {
            min: lat_range.min + (f64::from(ilato) / div) * lat_scale,
            max: lat_range.min + (f64::from(ilato.wrapping_add(1)) / div) * lat_scale,
        },
        longitude: Range {
            min: long_range.min + (f64::from(ilono) / div) * long_scale,
            max: long_range.min + (f64::from(ilono.wrapping_add(1)) / div) * long_scale,
        },
    })
}

fn decode_wgs84(hash: HashBits) -> Option<Area> {
    decode(WGS84_LONG, WGS84_LAT, hash)
}

/// C's `(uint64_t)` conversion of a double as x86-64 code compiled by gcc
/// performs it, out-of-range values included (a sorted set's score may
/// be anything: GEOPOS decodes it all the same).
fn c_double_to_u64(d: f64) -> u64 {
    const TWO63: f64 = 9_223_372_036_854_775_808.0;
    fn cvtt(x: f64) -> i64 {
        if x.is_nan() || !(-TWO63..TWO63).contains(&x) {
            i64::MIN
        } else {
            x as i64
        }
    }
    if d < TWO63 {
        cvtt(d) as u64
    } else {
        (cvtt(d - TWO63) as u64) ^ (1 << 63)
    }
}

/// Redis's `decodeGeohash`: the centre of a stored score's cell,
/// `[longitude, latitude]`, clamped to the WGS84 limits.
pub fn decode_score(score: f64) -> [f64; 2] {
    let hash = HashBits {
        bits: c_double_to_u64(score),
        step: STEP_MAX,
    };
    let area = decode_wgs84(hash).unwrap_or_default();
    let lon = ((area.longitude.min + area.longitude.max) / 2.0).clamp(LONG_MIN, LONG_MAX);
    let lat = ((area.latitude.min + area.latitude.max) / 2.0).clamp(LAT_MIN, LAT_MAX);
    [lon, lat]
}

/// GEOHASH's 11-character standard geohash of a stored score: decoded,
/// re-encoded over -90..90 latitude, the eleventh character always `0`.
pub fn standard_geohash(score: f64) -> [u8; 11] {
    const ALPHABET: &[u8; 32] = b"0123456789bcdefghjkmnpqrstuvwxyz";
    let [lon, lat] = decode_score(score);
    let bits = encode(Range { min: -180.0, max: 180.0 }, Range { min: -90.0, max: 90.0 }, lon, lat, 26).map_or(0, |h| h.bits);
    let mut out = [b'0'; 11];
    for (i, c) in out.iter_mut().enumerate().take(10) {
        *c = ALPHABET[((bits >> (52 - (i + 1) * 5)) & 0x1f) as usize];
    }
    out
}

fn move_x(hash: &mut HashBits, d: i8) {
    if d == 0 {
        return;
    }
    let mut x = hash.bits & 0xaaaaaaaaaaaaaaaa;
    let y = hash.bits & 0x5555555555555555;
    let zz = 0x5555555555555555u64 >> (64 - u32::from(hash.step) * 2);
    if d > 0 {
        x = x.wrapping_add(zz + 1);
    } else {
        x |= zz;
        x = x.wrapping_sub(zz + 1);
    }
    x &= 0xaaaaaaaaaaaaaaaau64 >> (64 - u32::from(hash.step) * 2);
    hash.bits = x | y;
}

fn move_y(hash: &mut HashBits, d: i8) {
    if d == 0 {
        return;
    }
    let x = hash.bits & 0xaaaaaaaaaaaaaaaa;
    let mut y = hash.bits & 0x5555555555555555;
    let zz = 0xaaaaaaaaaaaaaaaau64 >> (64 - u32::from(hash.step) * 2);
    if d > 0 {
        y = y.wrapping_add(zz + 1);
    } else {
        y |= zz;
        y = y.wrapping_sub(zz + 1);
    }
    y &= 0x5555555555555555u64 >> (64 - u32::from(hash.step) * 2);
    hash.bits = x | y;
}

fn moved(hash: HashBits, dx: i8, dy: i8) -> HashBits {
    let mut h = hash;
    move_x(&mut h, dx);
    move_y(&mut h, dy);
    h
}

/// Redis's `geohashEstimateStepsByRadius`.
fn estimate_steps_by_radius(range_meters: f64, lat: f64) -> u8 {
    if range_meters == 0.0 {
        return 26;
    }
    let mut range_meters = range_meters;
    let mut step: i32 = 1;
    while range_meters < MERCATOR_MAX {
        range_meters *= 2.0;
        step += 1;
    }
    step -= 2;
    if !(-66.0..=66.0).contains(&lat) {
        step -= 1;
        if !(-80.0..=80.0).contains(&lat) {
            step -= 1;
        }
    }
    step.clamp(1, 26) as u8
}

/// What a search covers: a circle of `radius`, or a `width` x `height`
/// box, in the unit `conversion` meters stand for, around `center`
/// (`[longitude, latitude]`).
#[derive(Debug, Clone, Copy)]
pub enum Shape {
    Circle { radius: f64 },
    Box { width: f64, height: f64 },
}

#[derive(Debug, Clone, Copy)]
pub struct Search {
    pub center: [f64; 2],
    pub conversion: f64,
    pub shape: Shape,
}

impl Search {
    /// `geohashBoundingBox`: min lon, min lat, max lon, max lat.
    fn bounding_box(&self) -> [f64; 4] {
        let [longitude, latitude] = self.center;
        let (height, width) = match self.shape {
            Shape::Circle { radius } => (self.conversion * radius, self.conversion * radius),
            Shape::Box { width, height } => (self.conversion * (height / 2.0), self.conversion * (width / 2.0)),
        };
        let lat_delta = rad_deg(height / EARTH_RADIUS_IN_METERS);
        let long_delta_top = rad_deg(width / EARTH_RADIUS_IN_METERS / deg_rad(latitude + lat_delta).cos());
        let long_delta_bottom = rad_deg(width / EARTH_RADIUS_IN_METERS / deg_rad(latitude - lat_delta).cos());
        let southern = latitude < 0.0;
        [
            if southern {
                longitude - long_delta_bottom
            } else {
                longitude - long_delta_top
            },
            latitude - lat_delta,
            if southern {
                longitude + long_delta_bottom
            } else {
                longitude + long_delta_top
            },
            latitude + lat_delta,
        ]
    }

    /// The cells to visit, in Redis's order (centre, N, S, E, W, NE, NW,
    /// SE, SW), zero cells for the ones Redis excludes
    /// (`geohashCalculateAreasByShapeWGS84` and `membersOfAllNeighbors`).
    pub fn cells(&self) -> [HashBits; 9] {
        let [min_lon, min_lat, max_lon, max_lat] = self.bounding_box();
        let [longitude, latitude] = self.center;
        let radius_meters = match self.shape {
            Shape::Circle { radius } => radius,
            Shape::Box { width, height } => ((width / 2.0) * (width / 2.0) + (height / 2.0) * (height / 2.0)).sqrt(),
        } * self.conversion;
        let mut steps = estimate_steps_by_radius(radius_meters, latitude);
        let center_cell = |steps| encode(WGS84_LONG, WGS84_LAT, longitude, latitude, steps).unwrap_or(HashBits { bits: 0, step: steps });
        let mut hash = center_cell(steps);
        let area_of = |h: HashBits| decode_wgs84(h).unwrap_or_default();

        let decrease = {
            let north = area_of(moved(hash, 0, 1));
            let south = area_of(moved(hash, 0, -1));
            let east = area_of(moved(hash, 1, 0));
            let west = area_of(moved(hash, -1, 0));
            north.latitude.max < max_lat || south.latitude.min > min_lat || east.longitude.max < max_lon || west.longitude.min > min_lon
        };
        if steps > 1 && decrease {
            steps -= 1;
            hash = center_cell(steps);
        }
        let area = area_of(hash);
        let mut n = moved(hash, 0, 1);
        let mut s = moved(hash, 0, -1);
        let mut e = moved(hash, 1, 0);
        let mut w = moved(hash, -1, 0);
        let mut ne = moved(hash, 1, 1);
        let mut nw = moved(hash, -1, 1);
        let mut se = moved(hash, 1, -1);
        let mut sw = moved(hash, -1, -1);
        if steps >= 2 {
            if area.latitude.min < min_lat {
                (s, sw, se) = (HashBits::ZERO, HashBits::ZERO, HashBits::ZERO);
            }
            if area.latitude.max > max_lat {
                (n, ne, nw) = (HashBits::ZERO, HashBits::ZERO, HashBits::ZERO);
            }
            if area.longitude.min < min_lon {
                (w, sw, nw) = (HashBits::ZERO, HashBits::ZERO, HashBits::ZERO);
            }
            if area.longitude.max > max_lon {
                (e, se, ne) = (HashBits::ZERO, HashBits::ZERO, HashBits::ZERO);
            }
        }
        [hash, n, s, e, w, ne, nw, se, sw]
    }

    /// Redis's `geoWithinShape` for a decoded point: the distance in
    /// meters when the point is inside, None when outside.
    pub fn distance_if_within(&self, point: [f64; 2]) -> Option<f64> {
        let [x1, y1] = self.center;
        let [x2, y2] = point;
        match self.shape {
            Shape::Circle { radius } => {
                let d = distance(x1, y1, x2, y2);
                if d > radius * self.conversion { None } else { Some(d) }
            }
            Shape::Box { width, height } => {
                let (width_m, height_m) = (width * self.conversion, height * self.conversion);
                if lat_distance(y2, y1) > height_m / 2.0 {
                    return None;
                }
                if distance(x2, y2, x1, y2) > width_m / 2.0 {
                    return None;
                }
                Some(distance(x1, y1, x2, y2))
            }
        }
    }
}

fn lat_distance(lat1d: f64, lat2d: f64) -> f64 {
    EARTH_RADIUS_IN_METERS * (deg_rad(lat2d) - deg_rad(lat1d)).abs()
}

/// Redis's `geohashGetDistance`: haversine, in meters.
pub fn distance(lon1d: f64, lat1d: f64, lon2d: f64, lat2d: f64) -> f64 {
    let lon1r = deg_rad(lon1d);
    let lon2r = deg_rad(lon2d);
    let v = ((lon2r - lon1r) / 2.0).sin();
    if v == 0.0 {
        return lat_distance(lat1d, lat2d);
    }
    let lat1r = deg_rad(lat1d);
    let lat2r = deg_rad(lat2d);
    let u = ((lat2r - lat1r) / 2.0).sin();
    let a = u * u + lat1r.cos() * lat2r.cos() * v * v;
    2.0 * EARTH_RADIUS_IN_METERS * a.sqrt().asin()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn palermo_scores_and_decodes_as_redis() {
        // GEOADD Sicily 13.361389 38.115556 "Palermo"; ZSCORE -> 3479099956230698.
        assert_eq!(score_of(13.361389, 38.115556), 3479099956230698);
        let [lon, lat] = decode_score(3479099956230698.0);
        assert_eq!(format!("{lon:.17}"), "13.36138933897018433");
        assert_eq!(format!("{lat:.17}"), "38.11555639549629859");
        assert_eq!(&standard_geohash(3479099956230698.0), b"sqc8b49rny0");
    }

    #[test]
    fn interleaving_round_trips() {
        for (x, y) in [(0u32, 0u32), (1, 2), (0x3ffffff, 0x1234567), (u32::MAX, 7)] {
            let sep = deinterleave64(interleave64(x, y));
            assert_eq!((sep as u32, (sep >> 32) as u32), (x, y));
        }
    }

    #[test]
    fn out_of_range_scores_convert_as_x86_casts() {
        assert_eq!(c_double_to_u64(-5.0), (-5i64) as u64);
        assert_eq!(c_double_to_u64(f64::INFINITY), 0);
        assert_eq!(c_double_to_u64(1e19), 10_000_000_000_000_000_000);
    }
}
