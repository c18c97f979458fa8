// jemalloc's options for the processes that link it (headroom_use_jemalloc in CMakeLists.txt),
// read by jemalloc from this global when it starts; any other malloc ignores it.
//
// Freed pages stay in the process for reuse instead of being returned to the kernel over
// jemalloc's default 10 s decay: a layout search frees and reallocates program vectors of
// megabytes thousands of times a second, and each page given back was faulted in and zeroed
// again by the kernel (96,000 page faults in the 32-GPU search of docs/speed.md, 40,000 with
// this; its system time a third). The cost is the process's high-water mark held to its end
// (maximum resident set 151 -> 168 MB in that search), which a command that exits in seconds pays.
extern "C" {
// NOLINTNEXTLINE(readability-identifier-naming): the name jemalloc looks up.
const char* malloc_conf = "dirty_decay_ms:-1,muzzy_decay_ms:-1";
}
