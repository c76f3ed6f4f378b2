-- bench/sysbench_timeline.lua: runs one of sysbench's OLTP workloads unchanged
-- and records when each of its transactions completed, to 100 ms, so that
-- bench/cluster.sh can see how long a node's death stalls the cluster (the
-- finest --report-interval is one second).
--
--   SB_TIMELINE_WORKLOAD=oltp_read_write SB_TIMELINE_OUT=/tmp/tl \
--     sysbench bench/sysbench_timeline.lua --db-driver=mysql ... run
--
-- The workload's options, statements and events are its own (it is loaded
-- with require, as sysbench's scripts load oltp_common). Every thread counts
-- the events that returned normally in each 100 ms slot of wall-clock time
-- (CLOCK_REALTIME, so the slots line up with `date +%s.%N` in the shell); an
-- event that fails and is restarted on an ignored error counts once, when a
-- try completes. At the end each thread writes "<slot> <events>" lines to
-- SB_TIMELINE_OUT.<thread id>, a slot being tenths of a second since the
-- epoch. Nothing is written for a thread that sysbench kills.

local workload = os.getenv("SB_TIMELINE_WORKLOAD")
local out = os.getenv("SB_TIMELINE_OUT")
if workload == nil or workload == "" or out == nil or out == "" then
   error("set SB_TIMELINE_WORKLOAD (e.g. oltp_read_write) and SB_TIMELINE_OUT (a path prefix)")
end

require(workload)

local ffi = require("ffi")
ffi.cdef [[
typedef struct { long tv_sec; long tv_nsec; } sb_timeline_timespec;
int clock_gettime(int clk_id, sb_timeline_timespec *tp);
]]
local CLOCK_REALTIME = 0
local now = ffi.new("sb_timeline_timespec")

local function slot()
   ffi.C.clock_gettime(CLOCK_REALTIME, now)
   return tonumber(now.tv_sec) * 10 + math.floor(tonumber(now.tv_nsec) / 100000000)
end

local counts = {}
local workload_event = event
function event(...)
   workload_event(...)
   local s = slot()
   counts[s] = (counts[s] or 0) + 1
end

local workload_thread_done = thread_done
function thread_done(...)
   local f = assert(io.open(out .. "." .. sysbench.tid, "w"))
   for s, n in pairs(counts) do
      f:write(string.format("%d %d\n", s, n))
   end
   f:close()
   if workload_thread_done ~= nil then
      workload_thread_done(...)
   end
end
