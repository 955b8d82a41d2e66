//! CLUSTER, ASKING, READONLY and READWRITE on a server without cluster
//! support, answered as a redis-server started with `cluster-enabled no`
//! answers them: every CLUSTER subcommand (HELP included), once its arity
//! is right, ASKING, READONLY and READWRITE reply `ERR This instance has
//! cluster support disabled` (cluster.c's `clusterCommand`, `askingCommand`
//! and `readonlyCommand`; redis-py's own suite checks READONLY's error).

use bytes::Bytes;

use super::table::{CommandSpec, cmd, container, flag::*};
use super::{CmdError, CmdResult, Ctx};

pub const COMMANDS: &[CommandSpec] = &[
    container("cluster", CLUSTER),
    cmd("asking", 1, cluster_disabled).flags(FAST),
    cmd("readonly", 1, cluster_disabled).flags(LOADING | STALE | FAST),
    cmd("readwrite", 1, cluster_disabled).flags(LOADING | STALE | FAST),
];

pub const CLUSTER_DISABLED: &str = "ERR This instance has cluster support disabled";

const CLUSTER: &[CommandSpec] = &[
    cmd("addslots", -3, cluster_disabled).flags(ADMIN | STALE),
    cmd("addslotsrange", -4, cluster_disabled).flags(ADMIN | STALE),
    cmd("bumpepoch", 2, cluster_disabled).flags(ADMIN | STALE),
    cmd("count-failure-reports", 3, cluster_disabled).flags(ADMIN | STALE),
    cmd("countkeysinslot", 3, cluster_disabled).flags(STALE),
    cmd("delslots", -3, cluster_disabled).flags(ADMIN | STALE),
    cmd("delslotsrange", -4, cluster_disabled).flags(ADMIN | STALE),
    cmd("failover", -2, cluster_disabled).flags(ADMIN | STALE),
    cmd("flushslots", 2, cluster_disabled).flags(ADMIN | STALE),
    cmd("forget", 3, cluster_disabled).flags(ADMIN | STALE),
    cmd("getkeysinslot", 4, cluster_disabled).flags(STALE),
    cmd("help", 2, cluster_disabled).flags(LOADING | STALE),
    cmd("info", 2, cluster_disabled).flags(STALE),
    cmd("keyslot", 3, cluster_disabled).flags(STALE),
    cmd("links", 2, cluster_disabled).flags(STALE),
    cmd("meet", -4, cluster_disabled).flags(ADMIN | STALE),
    cmd("myid", 2, cluster_disabled).flags(STALE),
    cmd("nodes", 2, cluster_disabled).flags(STALE),
    cmd("replicas", 3, cluster_disabled).flags(ADMIN | STALE),
    cmd("replicate", 3, cluster_disabled).flags(ADMIN | STALE),
    cmd("reset", -2, cluster_disabled).flags(ADMIN | STALE | NOSCRIPT),
    cmd("saveconfig", 2, cluster_disabled).flags(ADMIN | STALE),
    cmd("set-config-epoch", 3, cluster_disabled).flags(ADMIN | STALE),
    cmd("setslot", -4, cluster_disabled).flags(ADMIN | STALE),
    cmd("shards", 2, cluster_disabled).flags(STALE),
    cmd("slaves", 3, cluster_disabled).flags(ADMIN | STALE),
    cmd("slots", 2, cluster_disabled).flags(STALE),
];

fn cluster_disabled(_ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    Err(CmdError::new(CLUSTER_DISABLED))
}
