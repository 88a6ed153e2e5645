#include "gateway/hooks/program_hook.hpp"

namespace hookgate::hooks {

// Placeholder until the program-hook form lands.
LoadResult make_program_hook(HookSpec, std::vector<std::string>, bool) {
  return std::string("program hooks are not implemented yet");
}

LoadResult make_oneshot_hook(HookSpec, std::string, std::vector<int>) {
  return std::string("one-shot hooks are not implemented yet");
}

}  // namespace hookgate::hooks
