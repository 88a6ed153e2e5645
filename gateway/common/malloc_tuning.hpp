#pragma once
// The gateway's malloc settings, shared with the micro-benchmarks so that spool cycles there
// allocate the way the gateway does.
#include <malloc.h>

namespace hookgate {

// glibc gives the free top of a thread's heap back to the kernel (madvise, with a TLB flush on
// every CPU) as soon as 128 KiB are free there. The spool writer frees and reallocates about
// that much per batch, and at full load the churn was ~6 % of the gateway's CPU samples
// (docs/performance.md, change #8). A 1 MiB threshold ends the churn; 4 MiB did too but cost
// 12 MiB of peak RSS in the burst test. Fixing the mmap threshold (mallopt turns off glibc's
// dynamic one) keeps mid-size buffers in the heaps rather than in fresh mmaps.
inline void tune_malloc_for_gateway() {
  mallopt(M_TRIM_THRESHOLD, 1 << 20);
  mallopt(M_MMAP_THRESHOLD, 256 << 10);
}

}  // namespace hookgate
