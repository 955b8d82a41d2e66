//! The named workloads as data: for each, the commands one operation sends
//! (as templates), how each reply moves the operation on, the scripts it
//! needs loaded, and any setup before clients start.
//!
//! An operation is a small state machine over [`Step`]s: a step sends one
//! command, and its reply either ends the operation (done, contended, or
//! unexpected) or names the next step. The drivers in `client` run these
//! machines; nothing here does I/O.
//!
//! The Redisson workloads send exactly what Redisson 4.7.0 sends (the
//! script bodies from `lua/redisson/4.7.0/`, byte for byte, with the KEYS
//! and ARGV it passes; see REDISSON-WIRE.md): the owner id is
//! `<uuid>:<thread>`, where each pipeline slot of each client acts as one
//! Redisson thread; an unlock is followed by the fire-and-forget
//! `DEL redisson_unlock_latch:{name}:<request>` Redisson sends after it,
//! pipelined with that slot's next command. Each workload uses its own key
//! prefix, so runs of different workloads against one server do not contend.

use super::template::{ArgTemplate, CommandTemplate, TemplateError, Vars, encode_command};
use super::{BenchArgs, ScriptMode, WorkloadName};

const LOCK_ACQUIRE: &[u8] = include_bytes!("../../lua/redisson/4.7.0/lock-acquire.lua");
const LOCK_UNLOCK: &[u8] = include_bytes!("../../lua/redisson/4.7.0/lock-unlock.lua");
const RWLOCK_READ_ACQUIRE: &[u8] = include_bytes!("../../lua/redisson/4.7.0/rwlock-read-acquire.lua");
const RWLOCK_WRITE_ACQUIRE: &[u8] = include_bytes!("../../lua/redisson/4.7.0/rwlock-write-acquire.lua");
const RWLOCK_READ_UNLOCK: &[u8] = include_bytes!("../../lua/redisson/4.7.0/rwlock-read-unlock.lua");
const RWLOCK_WRITE_UNLOCK: &[u8] = include_bytes!("../../lua/redisson/4.7.0/rwlock-write-unlock.lua");
const SEMAPHORE_TRYACQUIRE: &[u8] = include_bytes!("../../lua/redisson/4.7.0/semaphore-tryacquire.lua");
const SEMAPHORE_RELEASE: &[u8] = include_bytes!("../../lua/redisson/4.7.0/semaphore-release.lua");
const SEMAPHORE_TRYSETPERMITS: &[u8] = include_bytes!("../../lua/redisson/4.7.0/semaphore-trysetpermits.lua");

/// How long the unlock scripts keep their dedup latch (ARGV `PX`), as in
/// the captured Redisson run.
const UNLOCK_LATCH_MS: &str = "8600";

/// The owner id every `lock-acquire` run uses, so that runs re-enter the
/// locks earlier runs left held instead of contending with them.
const FIXED_OWNER: &str = "7b0c5f1e-6b65-796c-6f63-6b62656e6368:1";

/// A script a workload sends, with its SHA1 and its `SCRIPT LOAD` command.
#[derive(Debug)]
pub struct Script {
    pub name: String,
    pub body: Vec<u8>,
    pub sha: String,
    /// `SCRIPT LOAD <body>`, encoded.
    pub load: Vec<u8>,
}

impl Script {
    fn new(name: &str, body: &[u8]) -> Script {
        Script {
            name: name.to_string(),
            body: body.to_vec(),
            sha: sha1_smol::Sha1::from(body).digest().to_string(),
            load: encode_command(&[b"SCRIPT", b"LOAD", body]),
        }
    }
}

/// How a step's reply is judged (error replies are handled before this).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    /// Any reply ends the operation.
    Any,
    /// A lock acquire script: nil is acquired (go on), an integer is the
    /// TTL of someone else's hold (contended).
    Acquire,
    /// An unlock script: 1 released, 0 still held reentrantly; nil means
    /// the lock was not ours, which a correct run never sees.
    Unlock,
    /// Semaphore tryacquire: 1 acquired (go on), 0 no permit (contended).
    TryAcquire,
}

/// Where an operation goes after a reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Next(usize),
    Done,
    Contended,
    Unexpected,
}

/// One command of an operation.
#[derive(Debug)]
pub struct Step {
    pub command: CommandTemplate,
    /// The script it runs, for SCRIPT LOAD on NOSCRIPT.
    pub script: Option<usize>,
    pub expect: Expect,
    /// The step after a reply that goes on.
    pub next: Option<usize>,
    /// A step sent without waiting (the unlock latch DEL) once this one
    /// ends the operation well, before the slot's next command.
    pub after: Option<usize>,
}

impl Step {
    /// What this step's reply means for the operation. Errors never get here.
    pub fn judge(&self, reply: &super::resp::Reply<'_>) -> Verdict {
        use super::resp::Reply;
        let go_on = || self.next.map_or(Verdict::Done, Verdict::Next);
        match self.expect {
            Expect::Any => Verdict::Done,
            Expect::Acquire => match reply {
                Reply::Nil => go_on(),
                Reply::Integer(_) => Verdict::Contended,
                _ => Verdict::Unexpected,
            },
            Expect::Unlock => match reply {
                Reply::Integer(0 | 1) => Verdict::Done,
                _ => Verdict::Unexpected,
            },
            Expect::TryAcquire => match reply {
                Reply::Integer(1) => go_on(),
                Reply::Integer(0) => Verdict::Contended,
                _ => Verdict::Unexpected,
            },
        }
    }
}

/// Which step an operation starts with.
#[derive(Debug, Clone, Copy)]
pub enum First {
    Step(usize),
    /// `rwlock-cycle`: a writer with this percentage, else a reader.
    ReadOrWrite {
        read: usize,
        write: usize,
        write_percent: u8,
    },
}

/// The waiting done by `lock-contended`: the channel an unlock publishes to.
#[derive(Debug)]
pub struct Wait {
    pub subscribe: CommandTemplate,
    pub unsubscribe: CommandTemplate,
}

/// A workload, ready to run.
#[derive(Debug)]
pub struct Plan {
    pub name: WorkloadName,
    pub steps: Vec<Step>,
    pub scripts: Vec<Script>,
    pub first: First,
    /// Commands sent once per key before the run (semaphore permits).
    pub setup: Option<CommandTemplate>,
    /// Set for `lock-contended`, whose clients wait as Redisson's lock() does.
    pub wait: Option<Wait>,
    /// `--keys` unless given.
    pub keys: u64,
}

impl Plan {
    pub fn first_step(&self, rng: &mut fastrand::Rng) -> usize {
        match self.first {
            First::Step(step) => step,
            First::ReadOrWrite {
                read,
                write,
                write_percent,
            } => {
                if rng.u8(..100) < write_percent {
                    write
                } else {
                    read
                }
            }
        }
    }

    /// Renders the setup command for key `key` (no placeholders but `{key}`).
    pub fn render_setup(&self, key: u64, scratch: &mut Vec<u8>, out: &mut Vec<u8>) {
        if let Some(setup) = &self.setup {
            let vars = Vars { key, ..Vars::default() };
            setup.render(&vars, &mut fastrand::Rng::with_seed(0), scratch, out);
        }
    }
}

/// Builds steps, sharing the script table and the script mode.
struct Builder {
    steps: Vec<Step>,
    scripts: Vec<Script>,
    mode: ScriptMode,
}

impl Builder {
    fn new(mode: ScriptMode) -> Builder {
        Builder {
            steps: Vec::new(),
            scripts: Vec::new(),
            mode,
        }
    }

    fn script(&mut self, name: &str, body: &[u8]) -> usize {
        self.scripts.push(Script::new(name, body));
        self.scripts.len() - 1
    }

    /// `EVALSHA sha n keys… args…` (or `EVAL body …`) as a template.
    fn eval(&self, script: usize, keys: &[String], args: &[String]) -> Result<CommandTemplate, TemplateError> {
        let s = &self.scripts[script];
        let mut argv = match self.mode {
            ScriptMode::Evalsha => vec![ArgTemplate::literal(b"EVALSHA"), ArgTemplate::literal(s.sha.as_bytes())],
            ScriptMode::Eval => vec![ArgTemplate::literal(b"EVAL"), ArgTemplate::literal(&s.body)],
        };
        argv.push(ArgTemplate::literal(keys.len().to_string().as_bytes()));
        for text in keys.iter().chain(args) {
            argv.push(ArgTemplate::parse(text)?);
        }
        Ok(CommandTemplate::new(argv))
    }

    fn step(&mut self, command: CommandTemplate, script: Option<usize>, expect: Expect) -> usize {
        self.steps.push(Step {
            command,
            script,
            expect,
            next: None,
            after: None,
        });
        self.steps.len() - 1
    }

    fn script_step(&mut self, script: usize, keys: &[String], args: &[String], expect: Expect) -> Result<usize, TemplateError> {
        let command = self.eval(script, keys, args)?;
        Ok(self.step(command, Some(script), expect))
    }

    fn plain_step(&mut self, args: &[&str]) -> Result<usize, TemplateError> {
        let command = CommandTemplate::parse(args)?;
        Ok(self.step(command, None, Expect::Any))
    }

    fn plan(self, name: WorkloadName, first: First, keys: u64) -> Plan {
        Plan {
            name,
            steps: self.steps,
            scripts: self.scripts,
            first,
            setup: None,
            wait: None,
            keys,
        }
    }
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

/// A fresh client id, as each Redisson instance makes one at start.
fn random_uuid(rng: &mut fastrand::Rng) -> String {
    let hex = |n: usize, rng: &mut fastrand::Rng| (0..n).map(|_| char::from(b"0123456789abcdef"[rng.usize(..16)])).collect::<String>();
    format!("{}-{}-4{}-a{}-{}", hex(8, rng), hex(4, rng), hex(3, rng), hex(3, rng), hex(12, rng))
}

/// Reentrant lock acquire + unlock (+ latch DEL) over `name`, owned by `owner`.
fn lock_steps(b: &mut Builder, name: &str, owner: &str, lease: &str, run: &str) -> Result<(usize, usize), TemplateError> {
    let acquire_script = b.script("lock-acquire", LOCK_ACQUIRE);
    let unlock_script = b.script("lock-unlock", LOCK_UNLOCK);
    let channel = format!("redisson_lock__channel:{{{name}}}");
    let latch = format!("redisson_unlock_latch:{{{name}}}:{run}-{{client}}-{{seq}}");
    let acquire = b.script_step(acquire_script, &[name.to_string()], &strings(&[lease, owner]), Expect::Acquire)?;
    let unlock = b.script_step(
        unlock_script,
        &[name.to_string(), channel, latch.clone()],
        &strings(&["0", lease, owner, "PUBLISH", UNLOCK_LATCH_MS]),
        Expect::Unlock,
    )?;
    let del = b.plain_step(&["DEL", &latch])?;
    b.steps[acquire].next = Some(unlock);
    b.steps[unlock].after = Some(del);
    Ok((acquire, unlock))
}

/// The plan for `args`, or why it cannot run.
pub fn plan(args: &BenchArgs) -> Result<Plan, String> {
    let mut rng = fastrand::Rng::new();
    let uuid = random_uuid(&mut rng);
    let owner = format!("{uuid}:{{thread}}");
    let lease = args.lease_ms.to_string();
    let mut b = Builder::new(args.script_mode);
    let template_error = |e: TemplateError| e.to_string();
    let plan = match args.workload {
        WorkloadName::Ping => {
            let step = b.plain_step(&["PING"]).map_err(template_error)?;
            b.plan(args.workload, First::Step(step), 1)
        }
        WorkloadName::Set => {
            let step = b.plain_step(&["SET", "bench:key:{key}", "xxx"]).map_err(template_error)?;
            b.plan(args.workload, First::Step(step), 1)
        }
        WorkloadName::Hset => {
            let step = b
                .plain_step(&["HSET", "bench:hash", "element:{key}", "xxx"])
                .map_err(template_error)?;
            b.plan(args.workload, First::Step(step), 1)
        }
        WorkloadName::LockAcquire => {
            let script = b.script("lock-acquire", LOCK_ACQUIRE);
            let keys = strings(&["bench:lock-acquire:{key}"]);
            let step = b
                .script_step(script, &keys, &strings(&[&lease, FIXED_OWNER]), Expect::Acquire)
                .map_err(template_error)?;
            b.plan(args.workload, First::Step(step), 1000)
        }
        WorkloadName::LockCycle => {
            let (acquire, _) = lock_steps(&mut b, "bench:lock:{key}", &owner, &lease, &uuid).map_err(template_error)?;
            b.plan(args.workload, First::Step(acquire), 1000)
        }
        WorkloadName::LockContended => {
            let name = "bench:contended:{key}";
            let (acquire, _) = lock_steps(&mut b, name, &owner, &lease, &uuid).map_err(template_error)?;
            let channel = format!("redisson_lock__channel:{{{name}}}");
            let wait = Wait {
                subscribe: CommandTemplate::parse(&["SUBSCRIBE", &channel]).map_err(template_error)?,
                unsubscribe: CommandTemplate::parse(&["UNSUBSCRIBE", &channel]).map_err(template_error)?,
            };
            let mut plan = b.plan(args.workload, First::Step(acquire), 1);
            plan.wait = Some(wait);
            plan
        }
        WorkloadName::RwlockCycle => rwlock_plan(b, args, &uuid, &lease).map_err(template_error)?,
        WorkloadName::SemaphoreCycle => {
            let name = "bench:semaphore:{key}";
            let channel = format!("redisson_sc:{{{name}}}");
            let tryacquire = b.script("semaphore-tryacquire", SEMAPHORE_TRYACQUIRE);
            let release = b.script("semaphore-release", SEMAPHORE_RELEASE);
            let trysetpermits = b.script("semaphore-trysetpermits", SEMAPHORE_TRYSETPERMITS);
            let acquire = b
                .script_step(tryacquire, &strings(&[name]), &strings(&["1"]), Expect::TryAcquire)
                .map_err(template_error)?;
            let release = b
                .script_step(release, &strings(&[name, &channel]), &strings(&["1", "PUBLISH"]), Expect::Any)
                .map_err(template_error)?;
            b.steps[acquire].next = Some(release);
            // Setup runs once, before any NOSCRIPT could be answered: by EVAL.
            let permits = args.permits.to_string();
            let mut setup = vec![ArgTemplate::literal(b"EVAL"), ArgTemplate::literal(&b.scripts[trysetpermits].body)];
            for text in ["2", name, &channel, &permits, "PUBLISH"] {
                setup.push(ArgTemplate::parse(text).map_err(template_error)?);
            }
            let mut plan = b.plan(args.workload, First::Step(acquire), 16);
            plan.setup = Some(CommandTemplate::new(setup));
            plan
        }
        WorkloadName::Script => {
            let path = args.file.as_ref().ok_or("the script workload needs --file FILE.lua")?;
            let body = std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
            let name = path
                .file_name()
                .map_or_else(|| "script".into(), |n| n.to_string_lossy().into_owned());
            let script = b.script(&name, &body);
            let step = b
                .script_step(script, &args.key_templates, &args.arg_templates, Expect::Any)
                .map_err(template_error)?;
            b.plan(args.workload, First::Step(step), 1000)
        }
    };
    if args.workload != WorkloadName::Script && args.file.is_some() {
        return Err("--file is only for the script workload".into());
    }
    Ok(plan)
}

fn rwlock_plan(mut b: Builder, args: &BenchArgs, uuid: &str, lease: &str) -> Result<Plan, TemplateError> {
    let name = "bench:rwlock:{key}";
    let owner = format!("{uuid}:{{thread}}");
    let writer = format!("{owner}:write");
    let timeout_prefix = format!("{{{name}}}:{owner}:rwlock_timeout");
    let channel = format!("redisson_rwlock:{{{name}}}");
    let latch = format!("redisson_unlock_latch:{{{name}}}:{uuid}-{{client}}-{{seq}}");
    let read_acquire = b.script("rwlock-read-acquire", RWLOCK_READ_ACQUIRE);
    let write_acquire = b.script("rwlock-write-acquire", RWLOCK_WRITE_ACQUIRE);
    let read_unlock = b.script("rwlock-read-unlock", RWLOCK_READ_UNLOCK);
    let write_unlock = b.script("rwlock-write-unlock", RWLOCK_WRITE_UNLOCK);
    let read = b.script_step(
        read_acquire,
        &strings(&[name, &timeout_prefix]),
        &strings(&[lease, &owner, &writer]),
        Expect::Acquire,
    )?;
    let write = b.script_step(write_acquire, &strings(&[name]), &strings(&[lease, &writer]), Expect::Acquire)?;
    let read_release = b.script_step(
        read_unlock,
        &strings(&[name, &channel, &timeout_prefix, &format!("{{{name}}}"), &latch]),
        &strings(&["0", &owner, "PUBLISH", UNLOCK_LATCH_MS]),
        Expect::Unlock,
    )?;
    let write_release = b.script_step(
        write_unlock,
        &strings(&[name, &channel, &latch]),
        &strings(&["0", lease, &writer, "PUBLISH", UNLOCK_LATCH_MS]),
        Expect::Unlock,
    )?;
    let del = b.plain_step(&["DEL", &latch])?;
    b.steps[read].next = Some(read_release);
    b.steps[write].next = Some(write_release);
    b.steps[read_release].after = Some(del);
    b.steps[write_release].after = Some(del);
    let first = First::ReadOrWrite {
        read,
        write,
        write_percent: args.write_percent,
    };
    Ok(b.plan(args.workload, first, 100))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::resp::Reply;

    fn plan_for(argv: &[&str]) -> Plan {
        use clap::Parser;
        let args = BenchArgs::try_parse_from(std::iter::once("bench").chain(argv.iter().copied())).unwrap();
        plan(&args).unwrap()
    }

    fn render(plan: &Plan, step: usize, vars: &Vars) -> String {
        let (mut scratch, mut out) = (Vec::new(), Vec::new());
        plan.steps[step]
            .command
            .render(vars, &mut fastrand::Rng::with_seed(0), &mut scratch, &mut out);
        String::from_utf8_lossy(&out).replace("\r\n", " ")
    }

    #[test]
    fn script_shas_match_the_index() {
        let plan = plan_for(&["lock-cycle"]);
        assert_eq!(plan.scripts[0].sha, "149c5a8bf18676fd99e9e6e24923bd64d9b62f94");
        assert_eq!(plan.scripts[1].sha, "6866459238a13a701d42f4971f12d9f3a50e2442");
    }

    #[test]
    fn lock_cycle_sends_redissons_keys_and_argv() {
        let plan = plan_for(&["lock-cycle", "--lease-ms", "30000"]);
        let vars = Vars {
            client: 3,
            thread: 7,
            seq: 5,
            key: 42,
        };
        let acquire = render(&plan, 0, &vars);
        assert!(acquire.starts_with("*6 $7 EVALSHA $40 149c5a8bf18676fd99e9e6e24923bd64d9b62f94 $1 1 $13 bench:lock:42 $5 30000 "));
        assert!(acquire.ends_with(":7 "), "{acquire}");
        let unlock = render(&plan, 1, &vars);
        assert!(
            unlock.contains(" $1 3 $13 bench:lock:42 $38 redisson_lock__channel:{bench:lock:42} "),
            "{unlock}"
        );
        assert!(unlock.contains("redisson_unlock_latch:{bench:lock:42}:"), "{unlock}");
        assert!(unlock.ends_with(":7 $7 PUBLISH $4 8600 "), "{unlock}");
        assert!(render(&plan, 2, &vars).starts_with("*2 $3 DEL $"));
        assert_eq!(plan.steps[0].next, Some(1));
        assert_eq!(plan.steps[1].after, Some(2));
    }

    #[test]
    fn eval_mode_sends_the_body() {
        let plan = plan_for(&["lock-acquire", "--script-mode", "eval"]);
        let text = render(&plan, 0, &Vars::default());
        assert!(text.starts_with("*6 $4 EVAL $"), "{text}");
        assert!(text.contains("redis.call('hincrby', KEYS[1], ARGV[2], 1)"));
    }

    #[test]
    fn acquire_replies_are_judged_as_redisson_does() {
        let plan = plan_for(&["lock-cycle"]);
        assert_eq!(plan.steps[0].judge(&Reply::Nil), Verdict::Next(1));
        assert_eq!(plan.steps[0].judge(&Reply::Integer(29_000)), Verdict::Contended);
        assert_eq!(plan.steps[0].judge(&Reply::Bulk(b"x")), Verdict::Unexpected);
        assert_eq!(plan.steps[1].judge(&Reply::Integer(1)), Verdict::Done);
        assert_eq!(plan.steps[1].judge(&Reply::Nil), Verdict::Unexpected);
    }

    #[test]
    fn rwlock_cycle_mixes_readers_and_writers() {
        let plan = plan_for(&["rwlock-cycle", "--write-percent", "50"]);
        let mut rng = fastrand::Rng::with_seed(3);
        let firsts: std::collections::HashSet<usize> = (0..100).map(|_| plan.first_step(&mut rng)).collect();
        assert_eq!(firsts.len(), 2);
        let read = render(
            &plan,
            0,
            &Vars {
                thread: 9,
                key: 1,
                ..Vars::default()
            },
        );
        assert!(read.contains("$14 bench:rwlock:1 $"), "{read}");
        assert!(read.contains(":9:rwlock_timeout $"), "{read}");
        assert!(read.ends_with(":9:write "), "{read}");
    }
}
