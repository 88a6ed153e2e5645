#pragma once
// Names the calling thread (at most 15 characters), so top, perf and /proc/PID/task attribute CPU
// to the pipeline stage instead of to creation order.
#include <pthread.h>

namespace hookgate {

inline void name_this_thread(const char* name) {
  pthread_setname_np(pthread_self(), name);
}

}  // namespace hookgate
