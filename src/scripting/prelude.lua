-- keylock's Lua sandbox, built to behave as Redis 7.0's scripting
-- environment. Runs once when the VM is created, as the chunk "=keylock";
-- the error handler recognizes frames of this chunk as internal.
--
-- Redis 7.0 makes the globals table and every library table read-only
-- with a patched Lua. keylock runs stock Lua 5.1, so the same contract is
-- built from metatables: scripts see proxies whose lookups fall through to
-- the hidden real tables; writes raise "Attempt to modify a readonly
-- table", reads of a missing global raise "Script attempted to access
-- nonexistent global variable '<name>'".
--
-- Arguments: the real globals table and the native helpers (redis.call,
-- sha1hex, log, setresp, math.random …, see scripting/api.rs).
local G, native = ...

local error, type, tostring, select, setmetatable, getmetatable, rawget, rawset, rawequal, next, unpack, pairs, ipairs =
      error, type, tostring, select, setmetatable, getmetatable, rawget, rawset, rawequal, next, unpack, pairs, ipairs
local xpcall, pcall = xpcall, pcall
local dbg = G.debug
local string_sub, string_byte, string_find = string.sub, string.byte, string.find

local READONLY = "Attempt to modify a readonly table"

-- proxy -> real table
local backing = setmetatable({}, { __mode = "k" })

local function readonly_newindex()
  error(READONLY, 2)
end

local function protect(real)
  local proxy = setmetatable({}, { __index = real, __newindex = readonly_newindex, __metatable = false })
  backing[proxy] = real
  return proxy
end

local function real_of(t)
  return backing[t] or t
end

-- redis.* -------------------------------------------------------------------

local redis = {}

-- Everything in redis.* that can raise an error is native (a C function
-- to Lua): a Lua wrapper would be dropped from the stack by a tail call
-- (`return redis.call(...)`), and the error would lose its line.
redis.call = native.call
redis.pcall = native.pcall
redis.sha1hex = native.sha1hex
redis.log = native.log
redis.setresp = native.setresp
redis.set_repl = native.set_repl
redis.acl_check_cmd = native.acl_check_cmd

local function error_table(text)
  return { err = text }
end

-- Redis's luaPushErrorBuff: "-CODE msg" keeps its code, anything else gets
-- ERR; line breaks at either end of the message are dropped.
local function error_from_buffer(buf)
  local code, msg = "ERR", buf
  if string_sub(buf, 1, 1) == "-" then
    local rest = string_sub(buf, 2)
    local space = string_find(rest, " ", 1, true)
    if space then
      code, msg = string_sub(rest, 1, space - 1), string_sub(rest, space + 1)
    else
      msg = rest
    end
  end
  msg = string.gsub(msg, "^[\r\n]+", "")
  msg = string.gsub(msg, "[\r\n]+$", "")
  return error_table(code .. " " .. msg)
end

function redis.error_reply(...)
  local msg = ...
  if select("#", ...) ~= 1 or type(msg) ~= "string" then
    return error_table("ERR wrong number or type of arguments")
  end
  if string_sub(msg, 1, 1) ~= "-" then
    msg = "-" .. msg
  end
  return error_from_buffer(msg)
end

function redis.status_reply(...)
  local msg = ...
  if select("#", ...) ~= 1 or type(msg) ~= "string" then
    return error_table("ERR wrong number or type of arguments")
  end
  return { ok = msg }
end





function redis.replicate_commands()
  return true
end


-- The debugger is not available: breakpoint and debug do nothing, as
-- outside a debugging session in Redis.
function redis.breakpoint()
  return false
end

function redis.debug()
end

redis.LOG_DEBUG = 0
redis.LOG_VERBOSE = 1
redis.LOG_NOTICE = 2
redis.LOG_WARNING = 3
redis.REPL_NONE = 0
redis.REPL_AOF = 1
redis.REPL_SLAVE = 2
redis.REPL_REPLICA = 2
redis.REPL_ALL = 3
redis.REDIS_VERSION = native.REDIS_VERSION
redis.REDIS_VERSION_NUM = native.REDIS_VERSION_NUM

-- math.random on Redis's own PRNG, so sequences match Redis's

G.math.random = native.random
G.math.randomseed = native.randomseed

-- pcall as Redis 7.0 replaces it: an error table becomes its message.
local function pack(...)
  return { n = select("#", ...), ... }
end

G.pcall = function(...)
  local r = pack(pcall(...))
  if not r[1] and type(r[2]) == "userdata" then
    local pending = native.take_pending_error()
    if pending ~= nil then
      r[2] = pending
    end
  end
  if not r[1] and type(r[2]) == "table" then
    local msg = rawget(r[2], "err")
    if type(msg) == "string" or type(msg) == "number" then
      r[2] = msg
    end
  end
  return unpack(r, 1, r.n)
end

-- A read-only table's metatable cannot be replaced either.
local raw_setmetatable = setmetatable
G.setmetatable = function(t, mt)
  if backing[t] then
    error(READONLY, 0)
  end
  return raw_setmetatable(t, mt)
end

-- Raw access sees through the read-only proxies but never writes them.
G.rawset = function(t, k, v)
  if backing[t] then
    error(READONLY, 0)
  end
  return rawset(t, k, v)
end
G.rawget = function(t, k)
  return rawget(real_of(t), k)
end
G.next = function(t, k)
  return next(real_of(t), k)
end
G.pairs = function(t)
  return next, real_of(t), nil
end
local function ipairs_step(t, i)
  i = i + 1
  local v = t[i]
  if v ~= nil then
    return i, v
  end
end
G.ipairs = function(t)
  if backing[t] then
    return ipairs_step, t, 0
  end
  return ipairs(t)
end

for _, name in ipairs({ "insert", "remove", "sort", "setn" }) do
  local f = G.table[name]
  if f then
    G.table[name] = function(t, ...)
      if backing[t] then
        error(READONLY, 2)
      end
      return f(t, ...)
    end
  end
end

-- Binary chunks are parsed as text, as Redis's patched loader does.
-- Lua 5.1's luaO_chunkid for string sources (LUA_IDSIZE 60).
local function chunkid(source)
  local first = string_sub(source, 1, 1)
  if first == "=" then
    return string_sub(source, 2, 60)
  end
  local nul = string_find(source, "%z")
  if nul then
    source = string_sub(source, 1, nul - 1)
  end
  local len = #source
  local stop = string_find(source, "[\r\n]")
  if stop then
    len = stop - 1
  end
  if len > 43 then
    len = 43
  end
  if len < #source then
    return '[string "' .. string_sub(source, 1, len) .. '..."]'
  end
  return '[string "' .. source .. '"]'
end
local raw_loadstring, raw_load = G.loadstring, G.load
G.loadstring = function(s, name)
  if type(s) == "string" and string_byte(s, 1) == 27 then
    return nil, chunkid(name or s) .. ":1: unexpected symbol near 'char(27)'"
  end
  return raw_loadstring(s, name)
end
G.load = function(f, name)
  local parts, i = {}, 0
  while true do
    local piece = f()
    if piece == nil or piece == "" then break end
    i = i + 1
    parts[i] = piece
  end
  local s = table.concat(parts)
  if string_byte(s, 1) == 27 then
    return nil, chunkid(name or "=(load)") .. ":1: unexpected symbol near 'char(27)'"
  end
  return raw_load(function() local p = s; s = nil; return p end, name)
end

-- The error handler --------------------------------------------------------

-- Redis takes the frame that raised the error, or the one above it when
-- that frame is a C function; keylock also steps over its own frames.
local function error_frame()
  local level = 3
  local info = dbg.getinfo(level, "nSl")
  if info and info.what == "C" then
    level = level + 1
    info = dbg.getinfo(level, "nSl")
  end
  while info and (info.what == "C" or info.source == "=keylock") do
    level = level + 1
    info = dbg.getinfo(level, "nSl")
  end
  return info
end

local function error_handler(err)
  local info = error_frame()
  if type(err) == "userdata" then
    local pending = native.take_pending_error()
    if pending ~= nil then
      err = pending
    end
  end
  if type(err) ~= "table" then
    err = { err = "ERR " .. tostring(err) }
  end
  if info then
    err.source = info.source
    err.line = info.currentline
  end
  return err
end

-- Runs a compiled script; returns ok, value-or-error-table.
local function run(f)
  return xpcall(f, error_handler)
end

-- Globals as Redis 7.0 leaves them ------------------------------------------

G.redis = redis
G.__redis__err__handler = error_handler
for _, name in ipairs({ "debug", "print", "dofile", "loadfile", "getfenv", "setfenv", "newproxy", "module", "require", "package", "os", "io" }) do
  G[name] = nil
end

local protected_globals = {}
for k, v in next, G do
  if type(v) == "table" and k ~= "_G" then
    protected_globals[k] = protect(v)
  end
end
for k, v in next, protected_globals do
  G[k] = v
end

local proxy_G = protect(G)
G._G = proxy_G
setmetatable(G, {
  __index = function(_, name)
    error("Script attempted to access nonexistent global variable '" .. tostring(name) .. "'", 2)
  end,
  __metatable = false,
})

return proxy_G, run
