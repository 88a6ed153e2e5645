#include "gateway/hooks/native_hook.hpp"

namespace hookgate::hooks {

// Placeholder until the native-hook form lands.
LoadResult make_native_hook(HookSpec, std::string, bool) {
  return std::string("native hooks are not implemented yet");
}

}  // namespace hookgate::hooks
