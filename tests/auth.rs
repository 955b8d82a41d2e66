//! AUTH, HELLO … AUTH and `--requirepass`.

mod common;
use common::*;

fn protected() -> ServerHandle {
    start_with(|c| c.set("requirepass", &["s3cret"]).unwrap())
}

#[test]
fn commands_before_auth_get_noauth() {
    let s = protected();
    let mut raw = Raw::connect(s.addr());
    assert_eq!(raw.call(&["GET", "k"]), b"-NOAUTH Authentication required.\r\n");
}

#[test]
fn unknown_commands_before_auth_are_still_unknown() {
    let s = protected();
    let mut raw = Raw::connect(s.addr());
    assert!(raw.call(&["NOSUCH"]).starts_with(b"-ERR unknown command 'NOSUCH'"));
}

#[test]
fn wrong_password_gets_wrongpass() {
    let s = protected();
    let mut raw = Raw::connect(s.addr());
    assert_eq!(
        raw.call(&["AUTH", "nope"]),
        b"-WRONGPASS invalid username-password pair or user is disabled.\r\n"
    );
    assert_eq!(
        raw.call(&["AUTH", "someone", "s3cret"]),
        b"-WRONGPASS invalid username-password pair or user is disabled.\r\n"
    );
}

#[test]
fn auth_with_password_or_default_user_unlocks_the_connection() {
    let s = protected();
    let mut raw = Raw::connect(s.addr());
    assert_eq!(raw.call(&["AUTH", "s3cret"]), b"+OK\r\n");
    assert_eq!(raw.call(&["SET", "k", "v"]), b"+OK\r\n");
    let mut other = Raw::connect(s.addr());
    assert_eq!(other.call(&["AUTH", "default", "s3cret"]), b"+OK\r\n");
    assert_eq!(other.call(&["GET", "k"]), b"$1\r\nv\r\n");
}

#[test]
fn hello_without_auth_on_a_protected_server_is_refused() {
    let s = protected();
    let mut raw = Raw::connect(s.addr());
    let reply = raw.call(&["HELLO", "3"]);
    assert_eq!(
        String::from_utf8_lossy(&reply),
        "-NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time\r\n"
    );
    if let Some(redis) = real_redis_with(&["--requirepass", "s3cret"]) {
        assert_eq!(Raw::connect(redis.addr).call(&["HELLO", "3"]), reply);
    }
}

#[test]
fn hello_with_auth_authenticates_and_switches_protocol() {
    let s = protected();
    let mut raw = Raw::connect(s.addr());
    let reply = raw.call(&["HELLO", "3", "AUTH", "default", "s3cret", "SETNAME", "worker-1"]);
    assert!(reply.starts_with(b"%7\r\n"), "{}", String::from_utf8_lossy(&reply));
    assert_eq!(raw.call(&["CLIENT", "GETNAME"]), b"$8\r\nworker-1\r\n");
    assert_eq!(raw.call(&["GET", "missing"]), b"_\r\n");
}

#[test]
fn auth_without_a_configured_password_is_an_error() {
    let s = start();
    let mut raw = Raw::connect(s.addr());
    assert_eq!(
        raw.call(&["AUTH", "x"]),
        b"-ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?\r\n"
    );
}

#[test]
fn redis_crate_connects_with_a_password_in_the_url() {
    let s = protected();
    let url = format!("redis://:s3cret@{}/", s.addr());
    let mut c = redis::Client::open(url).unwrap().get_connection().unwrap();
    assert_eq!(q::<String>(&mut c, &["PING"]), "PONG");
}

#[test]
fn reset_forgets_authentication() {
    let s = protected();
    let mut raw = Raw::connect(s.addr());
    raw.call(&["AUTH", "s3cret"]);
    assert_eq!(raw.call(&["RESET"]), b"+RESET\r\n");
    assert_eq!(raw.call(&["GET", "k"]), b"-NOAUTH Authentication required.\r\n");
}
