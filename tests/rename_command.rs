//! `rename-command old new` (and `old ""`): a command is served under its
//! new name only, to clients, in MULTI and from scripts, as redis-server
//! 7.0.15 serves it; bad renames stop the start with Redis's texts; CONFIG
//! REWRITE keeps the directive.

mod common;

use common::{Binary, Raw, text};

const ACQUIRE: &str = include_str!("../lua/redisson/4.7.0/lock-acquire.lua");

const RENAMES: &[&str] = &["--rename-command", "flushdb", "badger", "--rename-command", "get", ""];

/// What a client sees of the renamed and removed commands.
fn session(c: &mut Raw) -> Vec<String> {
    let mut seen = Vec::new();
    let mut call = |args: &[&str]| seen.push(text(c.call(args)));
    call(&["SET", "k", "v"]);
    call(&["GET", "k"]);
    call(&["FLUSHDB"]);
    call(&["flushdb", "ASYNC"]);
    call(&["EVAL", "return redis.call('get', KEYS[1])", "1", "k"]);
    call(&["EVAL", "return redis.pcall('flushdb')", "0"]);
    call(&["MULTI"]);
    call(&["GET", "k"]);
    call(&["EXEC"]);
    call(&["ACL", "DRYRUN", "default", "get", "k"]);
    call(&["BADGER"]);
    call(&["EXISTS", "k"]);
    call(&["SET", "k", "v"]);
    call(&["EVAL", "return redis.call('badger')", "0"]);
    call(&["DBSIZE"]);
    seen
}

#[test]
fn renamed_and_removed_commands_answer_as_redis_answers() {
    let keylock = Binary::start(RENAMES);
    let got = session(&mut Raw::connect(keylock.addr));
    assert_eq!(got[2], "-ERR unknown command 'FLUSHDB', with args beginning with: \r\n");
    assert_eq!(got[10], "+OK\r\n");
    assert_eq!(got[14], ":0\r\n");
    if let Some(redis) = common::real_redis_with(RENAMES) {
        assert_eq!(got, session(&mut Raw::connect(redis.addr)));
    }
}

#[test]
fn lock_scripts_still_run_when_a_data_command_is_renamed() {
    // Native runs call commands by their own names; with `pexpire`
    // renamed they give way to Lua, which fails as Redis's does.
    let keylock = Binary::start(&["--rename-command", "pexpire", "pexp2"]);
    let mut c = Raw::connect(keylock.addr);
    let reply = text(c.call(&["EVAL", ACQUIRE, "1", "lock", "30000", "id:1"]));
    assert!(reply.starts_with("-ERR Unknown Redis command called from script"), "{reply}");
    let info = text(c.call(&["INFO", "keylock"]));
    assert!(info.contains("recognized_runs_native:0\r\n"), "{info}");
    // Renaming an administrative command leaves the native run in place.
    let keylock = Binary::start(&["--rename-command", "flushall", ""]);
    let mut c = Raw::connect(keylock.addr);
    assert_eq!(c.call(&["EVAL", ACQUIRE, "1", "lock", "30000", "id:1"]), b"$-1\r\n");
    let info = text(c.call(&["INFO", "keylock"]));
    assert!(info.contains("recognized_runs_native:1\r\n"), "{info}");
}

#[test]
fn bad_renames_stop_the_start_with_redis_texts() {
    for (args, problem) in [
        (&["--rename-command", "nosuch", "x"][..], "No such command in rename-command"),
        (&["--rename-command", "set", "get"][..], "Target command name already exists"),
    ] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_keylock"))
            .args(["--port", "0"])
            .args(args)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(problem), "{args:?}: {stderr}");
    }
}

#[test]
fn a_rename_in_the_config_file_survives_rewrite_and_restart() {
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("keylock.conf");
    std::fs::write(&conf, "rename-command flushdb badger\n").unwrap();
    let dir_flag = dir.path().to_str().unwrap();
    {
        let server = Binary::start_from_file(&conf, &["--dir", dir_flag]);
        let mut c = Raw::connect(server.addr);
        assert_eq!(c.call(&["CONFIG", "REWRITE"]), b"+OK\r\n");
    }
    assert!(
        std::fs::read_to_string(&conf)
            .unwrap()
            .starts_with("rename-command flushdb badger\n")
    );
    let server = Binary::start_from_file(&conf, &["--dir", dir_flag]);
    let mut c = Raw::connect(server.addr);
    assert!(text(c.call(&["FLUSHDB"])).starts_with("-ERR unknown command"));
    assert_eq!(c.call(&["BADGER"]), b"+OK\r\n");
}
