//! ACL: users, what they may run, and what happens to their connections
//! when their rules change. Byte-exact replies of single commands are in
//! `tests/corpus/acl.txt`; here are the behaviours that need more than
//! one connection, a configuration, or a file.

mod common;
use common::*;

use std::net::SocketAddr;

const NOPERM_CMD_GET: &str = "-NOPERM this user has no permissions to run the 'get' command\r\n";
const NOPERM_KEY: &str = "-NOPERM this user has no permissions to access one of the keys used as arguments\r\n";
const NOPERM_CHANNEL: &str = "-NOPERM this user has no permissions to access one of the channels used as arguments\r\n";

fn text(reply: Vec<u8>) -> String {
    String::from_utf8_lossy(&reply).into_owned()
}

fn as_user(addr: SocketAddr, user: &str, pass: &str) -> Raw {
    let mut raw = Raw::connect(addr);
    assert_eq!(text(raw.call(&["AUTH", user, pass])), "+OK\r\n");
    raw
}

#[test]
fn new_connections_run_as_the_default_user_with_every_permission() {
    let s = start();
    let mut c = conn(&s);
    assert_eq!(q::<String>(&mut c, &["ACL", "WHOAMI"]), "default");
    assert_eq!(
        q::<Vec<String>>(&mut c, &["ACL", "LIST"]),
        vec!["user default on nopass ~* &* +@all"]
    );
    assert_eq!(q::<String>(&mut c, &["SET", "k", "v"]), "OK");
}

#[test]
fn a_user_without_the_command_gets_noperm_naming_it() {
    let s = start();
    let mut admin = conn(&s);
    let _: () = q(&mut admin, &["ACL", "SETUSER", "u", "on", ">p", "~*", "+set"]);
    let mut raw = as_user(s.addr(), "u", "p");
    assert_eq!(text(raw.call(&["SET", "k", "v"])), "+OK\r\n");
    assert_eq!(text(raw.call(&["GET", "k"])), NOPERM_CMD_GET);
    assert_eq!(
        text(raw.call(&["ACL", "WHOAMI"])),
        "-NOPERM this user has no permissions to run the 'acl|whoami' command\r\n"
    );
}

#[test]
fn key_patterns_limit_reads_and_writes_separately() {
    let s = start();
    let mut admin = conn(&s);
    let _: () = q(&mut admin, &["ACL", "SETUSER", "u", "on", ">p", "+@all", "%R~r:*", "%W~w:*"]);
    let mut raw = as_user(s.addr(), "u", "p");
    assert_eq!(text(raw.call(&["GET", "r:1"])), "$-1\r\n");
    assert_eq!(text(raw.call(&["SET", "w:1", "v"])), "+OK\r\n");
    assert_eq!(text(raw.call(&["GET", "w:1"])), NOPERM_KEY);
    assert_eq!(text(raw.call(&["SET", "r:1", "v"])), NOPERM_KEY);
}

#[test]
fn channel_patterns_limit_publish_and_subscribe() {
    let s = start();
    let mut admin = conn(&s);
    let _: () = q(&mut admin, &["ACL", "SETUSER", "u", "on", ">p", "+@all", "&news.*"]);
    let mut raw = as_user(s.addr(), "u", "p");
    assert_eq!(text(raw.call(&["PUBLISH", "news.1", "m"])), ":0\r\n");
    assert_eq!(text(raw.call(&["PUBLISH", "sport", "m"])), NOPERM_CHANNEL);
    assert_eq!(text(raw.call(&["PSUBSCRIBE", "news.?"])), NOPERM_CHANNEL);
    assert_eq!(
        text(raw.call(&["PSUBSCRIBE", "news.*"])),
        "*3\r\n$10\r\npsubscribe\r\n$6\r\nnews.*\r\n:1\r\n"
    );
}

#[test]
fn scripts_run_with_the_permissions_of_their_caller() {
    let s = start();
    let mut admin = conn(&s);
    let _: () = q(&mut admin, &["ACL", "SETUSER", "u", "on", ">p", "+eval", "+get", "~k*"]);
    let mut raw = as_user(s.addr(), "u", "p");
    assert_eq!(text(raw.call(&["EVAL", "return redis.call('get', 'k1')", "0"])), "$-1\r\n");
    assert!(
        text(raw.call(&["EVAL", "return redis.call('set', 'k1', 'v')", "0"]))
            .starts_with("-ERR The user executing the script can't run this command or subcommand script:")
    );
    assert!(text(raw.call(&["EVAL", "return redis.call('get', 'other')", "0"])).starts_with(
        "-ERR The user executing the script can't access at least one of the keys mentioned in the command arguments script:"
    ));
}

#[test]
fn exec_checks_the_rules_again_when_they_changed_after_queueing() {
    let s = start();
    let mut admin = conn(&s);
    let _: () = q(&mut admin, &["ACL", "SETUSER", "u", "on", ">p", "+@all", "~*"]);
    let mut raw = as_user(s.addr(), "u", "p");
    raw.call(&["MULTI"]);
    assert_eq!(text(raw.call(&["SET", "k", "v"])), "+QUEUED\r\n");
    let _: () = q(&mut admin, &["ACL", "SETUSER", "u", "-set"]);
    assert_eq!(
        text(raw.call(&["EXEC"])),
        "*1\r\n-NOPERM ACLs rules changed between the moment the transaction was accumulated and the EXEC call. This command is no longer allowed for the following reason: no permission to execute the command or subcommand\r\n"
    );
    let log: Vec<redis::Value> = q(&mut admin, &["ACL", "LOG"]);
    assert_eq!(log.len(), 1);
}

#[test]
fn deleting_a_user_disconnects_its_clients() {
    let s = start();
    let mut admin = conn(&s);
    let _: () = q(&mut admin, &["ACL", "SETUSER", "u", "on", ">p", "+@all", "~*"]);
    let mut victim = as_user(s.addr(), "u", "p");
    assert_eq!(q::<i64>(&mut admin, &["ACL", "DELUSER", "u"]), 1);
    wait_until(5, "the deleted user's client closes", || victim.is_closed());
}

#[test]
fn revoking_a_channel_disconnects_its_subscribers() {
    let s = start();
    let mut admin = conn(&s);
    let _: () = q(&mut admin, &["ACL", "SETUSER", "u", "on", ">p", "+@all", "&a", "&b"]);
    let mut keeps = as_user(s.addr(), "u", "p");
    keeps.call(&["SUBSCRIBE", "a"]);
    let mut loses = as_user(s.addr(), "u", "p");
    loses.call(&["SUBSCRIBE", "b"]);
    let _: () = q(&mut admin, &["ACL", "SETUSER", "u", "resetchannels", "&a"]);
    wait_until(5, "the subscriber to b closes", || loses.is_closed());
    assert!(silent_for(&mut keeps, std::time::Duration::from_millis(100)));
    assert_eq!(text(keeps.call(&["PING"])), "*2\r\n$4\r\npong\r\n$0\r\n\r\n");
}

#[test]
fn requirepass_is_the_default_users_password() {
    let s = start_with(|c| c.set("requirepass", &["s3cret"]).unwrap());
    let mut raw = Raw::connect(s.addr());
    assert_eq!(text(raw.call(&["AUTH", "default", "s3cret"])), "+OK\r\n");
    let list = text(raw.call(&["ACL", "LIST"]));
    assert!(list.contains("user default on #"), "{list}");
    assert_eq!(text(raw.call(&["CONFIG", "SET", "requirepass", ""])), "+OK\r\n");
    assert_eq!(
        text(raw.call(&["ACL", "LIST"])),
        "*1\r\n$34\r\nuser default on nopass ~* &* +@all\r\n"
    );
}

#[test]
fn a_default_user_without_nopass_makes_new_connections_authenticate() {
    let s = start();
    let mut admin = conn(&s);
    let _: () = q(&mut admin, &["ACL", "SETUSER", "default", "resetpass", ">pw"]);
    let mut raw = Raw::connect(s.addr());
    assert_eq!(text(raw.call(&["GET", "k"])), "-NOAUTH Authentication required.\r\n");
    assert_eq!(text(raw.call(&["AUTH", "pw"])), "+OK\r\n");
    assert_eq!(text(raw.call(&["GET", "k"])), "$-1\r\n");
}

#[test]
fn failed_authentication_is_logged() {
    let s = start();
    let mut c = conn(&s);
    let mut raw = Raw::connect(s.addr());
    assert_eq!(
        text(raw.call(&["AUTH", "nobody", "x"])),
        "-WRONGPASS invalid username-password pair or user is disabled.\r\n"
    );
    let log: Vec<Vec<redis::Value>> = q(&mut c, &["ACL", "LOG"]);
    let entry: Vec<String> = log[0]
        .iter()
        .map(|v| match v {
            redis::Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
            other => format!("{other:?}").to_lowercase(),
        })
        .collect();
    assert_eq!(
        &entry[..10],
        [
            "count", "int(1)", "reason", "auth", "context", "toplevel", "object", "AUTH", "username", "nobody"
        ]
    );
}

#[test]
fn user_lines_of_the_configuration_create_users() {
    let s = start_with(|c| {
        c.users
            .push(vec!["reader".into(), "on".into(), ">r".into(), "~*".into(), "+@read".into()]);
    });
    let mut raw = as_user(s.addr(), "reader", "r");
    assert_eq!(text(raw.call(&["GET", "k"])), "$-1\r\n");
    assert_eq!(
        text(raw.call(&["SET", "k", "v"])),
        "-NOPERM this user has no permissions to run the 'set' command\r\n"
    );
}

#[test]
fn a_bad_user_line_is_a_configuration_error() {
    let err = Config::from_args(&["--user".to_string(), "u".into(), "nosuchrule".into()]).unwrap_err();
    assert!(err.to_string().contains("Error in user declaration"), "{err}");
}

#[test]
fn acl_save_and_load_round_trip_through_the_acl_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("users.acl");
    std::fs::write(&path, "user default on nopass ~* &* +@all\nuser u on >p ~k* +get\n").unwrap();
    let path_text = path.to_string_lossy().into_owned();
    let s = start_with(|c| c.directives.push(("aclfile".into(), vec![path_text.clone()])));
    let mut c = conn(&s);
    assert_eq!(q::<Vec<String>>(&mut c, &["ACL", "USERS"]), vec!["default", "u"]);
    let _: () = q(&mut c, &["ACL", "SETUSER", "v", "on", "nopass", "+@all"]);
    let _: () = q(&mut c, &["ACL", "SAVE"]);
    let saved = std::fs::read_to_string(&path).unwrap();
    assert!(saved.contains("user v on nopass resetchannels +@all\n"), "{saved}");
    let mut client_of_u = as_user(s.addr(), "u", "p");
    std::fs::write(&path, "user default on nopass ~* &* +@all\n").unwrap();
    let _: () = q(&mut c, &["ACL", "LOAD"]);
    assert_eq!(q::<Vec<String>>(&mut c, &["ACL", "USERS"]), vec!["default"]);
    wait_until(5, "the client of a user ACL LOAD replaced closes", || client_of_u.is_closed());
}

#[test]
fn an_acl_file_that_does_not_load_stops_the_server_from_starting() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("users.acl");
    std::fs::write(&path, "user u on nopass +nosuch\n").unwrap();
    let mut config = Config::ephemeral();
    config
        .directives
        .push(("aclfile".into(), vec![path.to_string_lossy().into_owned()]));
    let err = Server::new(config).start().err().expect("refused");
    assert!(
        err.to_string().starts_with("Aborting Redis startup because of ACL errors:"),
        "{err}"
    );
}

#[test]
fn acl_load_with_errors_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("users.acl");
    std::fs::write(&path, "user u on nopass +@all\n").unwrap();
    let path_text = path.to_string_lossy().into_owned();
    let s = start_with(|c| c.directives.push(("aclfile".into(), vec![path_text.clone()])));
    let mut c = conn(&s);
    std::fs::write(&path, "user w on nopass +nosuch\n").unwrap();
    let err = q_err(&mut c, &["ACL", "LOAD"]);
    assert!(err.contains("Error in applying operation '+nosuch'"), "{err}");
    assert!(err.ends_with("WARNING: ACL errors detected, no change to the previously active ACL rules was performed"));
    assert_eq!(q::<Vec<String>>(&mut c, &["ACL", "USERS"]), vec!["default", "u"]);
}

#[test]
fn client_list_names_the_user() {
    let s = start();
    let mut admin = conn(&s);
    let _: () = q(&mut admin, &["ACL", "SETUSER", "u", "on", ">p", "+@all", "~*"]);
    let mut raw = as_user(s.addr(), "u", "p");
    assert!(text(raw.call(&["CLIENT", "INFO"])).contains(" user=u "));
}

/// Users deleted under their own and another connection, as both servers
/// handle it.
fn deluser_of_the_running_client(addr: SocketAddr) -> Vec<Vec<u8>> {
    let mut admin = Raw::connect(addr);
    let mut out = vec![admin.call(&["ACL", "SETUSER", "u", "on", ">p", "+@all", "~*"])];
    let mut c = Raw::connect(addr);
    out.push(c.call(&["AUTH", "u", "p"]));
    out.push(c.call(&["ACL", "DELUSER", "u"]));
    out.push(vec![c.is_closed() as u8]);
    out.push(admin.call(&["ACL", "USERS"]));
    out
}

#[test]
fn deleting_the_running_clients_own_user_answers_then_closes_as_redis() {
    same_on_both_servers(deluser_of_the_running_client);
}

#[test]
fn credentials_and_rules_are_redacted_in_the_slow_log() {
    let s = start();
    let mut raw = Raw::connect(s.addr());
    raw.call(&["CONFIG", "SET", "slowlog-log-slower-than", "0"]);
    raw.call(&["ACL", "SETUSER", "u", "on", ">pw", "+@all"]);
    raw.call(&["AUTH", "u", "pw"]);
    let log = text(raw.call(&["SLOWLOG", "GET", "3"])).to_lowercase();
    assert!(log.contains("$4\r\nauth\r\n$10\r\n(redacted)\r\n$10\r\n(redacted)\r\n"), "{log}");
    assert!(
        log.contains("$3\r\nacl\r\n$7\r\nsetuser\r\n$10\r\n(redacted)\r\n$10\r\n(redacted)\r\n$10\r\n(redacted)\r\n$10\r\n(redacted)\r\n"),
        "{log}"
    );
    assert!(!log.contains("pw"), "{log}");
}

#[test]
fn a_scripts_refusal_is_logged_with_its_callers_connection() {
    let s = start();
    let mut admin = conn(&s);
    let _: () = q(&mut admin, &["ACL", "SETUSER", "u", "on", ">p", "+eval", "~k*"]);
    let mut raw = as_user(s.addr(), "u", "p");
    raw.call(&["EVAL", "return redis.call('get', 'k')", "0"]);
    let log = text(raw_admin_log(s.addr()));
    assert!(log.contains("$3\r\nlua\r\n"), "{log}");
    assert!(log.contains(" cmd=eval user=u "), "{log}");
    assert!(!log.contains("addr=0.0.0.0:0"), "{log}");
}

fn raw_admin_log(addr: SocketAddr) -> Vec<u8> {
    Raw::connect(addr).call(&["ACL", "LOG", "1"])
}

/// A user's channels narrowed under two subscribers, as both servers
/// handle it: the one whose pattern is no longer listed goes.
fn channels_revoked_under_subscribers(addr: SocketAddr) -> Vec<Vec<u8>> {
    let mut admin = Raw::connect(addr);
    let mut out = vec![admin.call(&["ACL", "SETUSER", "u", "on", ">p", "+@all", "&a", "&b*"])];
    let mut keeps = Raw::connect(addr);
    out.push(keeps.call(&["AUTH", "u", "p"]));
    out.push(keeps.call(&["SUBSCRIBE", "a"]));
    let mut loses = Raw::connect(addr);
    out.push(loses.call(&["AUTH", "u", "p"]));
    out.push(loses.call(&["PSUBSCRIBE", "b*"]));
    out.push(admin.call(&["ACL", "SETUSER", "u", "resetchannels", "&a", "&b"]));
    out.push(vec![loses.is_closed() as u8]);
    out.push(keeps.call(&["PING"]));
    out.push(admin.call(&["PUBLISH", "a", "m"]));
    out
}

#[test]
fn narrowing_a_users_channels_disconnects_subscribers_as_redis() {
    same_on_both_servers(channels_revoked_under_subscribers);
}
