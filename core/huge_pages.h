// Transparent huge pages for the program's own heap (README.md, "Huge pages").
//
// A long run's analysis fills arrays of hundreds of MiB once; with 4 KiB pages half of
// `fragscope graphs` on a million replays went to page faults. Where the kernel gives huge pages
// only to memory that asks for them (transparent_hugepage = madvise, Debian's default), glibc's
// malloc asks when started with GLIBC_TUNABLES=glibc.malloc.hugetlb=1, a setting read once at
// start-up. preferHugePages() therefore re-executes the program once with it and restores the
// caller's environment at once after, so processes the program starts (a recorded workload, the
// agent's target) inherit the environment they were given, never the setting.
#pragma once

#include <string>

namespace fs {

// Call first in main(), before any thread starts. Returns when no re-execution is wanted: the
// setting is on (or was given), the kernel has no huge pages to give (never) or gives them to
// every heap already (always), FRAGSCOPE_HUGE_PAGES=0, a sanitizer build, the work is small (the
// files named in argv hold less than kHugePagesFrom bytes, when onlyForLargeInputs: a second
// start costs more than the page faults it saves), a virtio balloon reports free memory to the
// hypervisor (a virtual machine whose freed 2 MiB blocks the host takes back: a huge page then
// costs more to fault in than the 4 KiB pages it replaces), or exec failed. Otherwise does not
// return. FRAGSCOPE_HUGE_PAGES=1 asks even under a reporting balloon.
void preferHugePages(char** argv, bool onlyForLargeInputs = false);
constexpr unsigned long long kHugePagesFrom = 64ull << 20;

// One line for --version and the benchmarks: whether this process's malloc asked for huge pages,
// and why not when it did not.
std::string hugePagesStatus();

} // namespace fs
