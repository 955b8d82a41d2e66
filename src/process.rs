//! redis-server's process contract, the parts an init system or a test
//! harness relies on: `--version`'s line.

/// `redis-server --version`'s line, as Redis prints it (`v=`, `sha=`,
/// `malloc=`, `bits=`, `build=`), then keylock's own version as one more
/// `name=value` field, which parsers of Redis's line skip.
pub fn version_line() -> String {
    // Redis's build id is a hash of its version and build; keylock's is
    // the same kind of stable hex digest, of its own version.
    let digest = sha1_smol::Sha1::from(format!("keylock {}", crate::VERSION)).digest().to_string();
    format!(
        "Redis server v={} sha=00000000:0 malloc=mimalloc bits=64 build={} keylock={}",
        crate::REDIS_VERSION,
        &digest[..16],
        crate::VERSION
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_version_line_parses_as_redis_servers() {
        let line = version_line();
        let fields: Vec<&str> = line.split(' ').collect();
        assert_eq!(&fields[..3], ["Redis", "server", "v=7.0.15"]);
        assert!(fields[3].starts_with("sha=") && fields[5] == "bits=64", "{line}");
        assert!(
            fields[6]
                .strip_prefix("build=")
                .is_some_and(|h| h.chars().all(|c| c.is_ascii_hexdigit()))
        );
        assert_eq!(fields[7], format!("keylock={}", crate::VERSION));
    }
}
