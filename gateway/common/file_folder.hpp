#pragma once
// Whether a file can be made where a setting puts it: the spool, an ipc:// socket. One check, so
// `check` and `run` word it alike.
#include <unistd.h>

#include <filesystem>
#include <optional>
#include <string>

namespace hookgate {

// Why no file can be created at `file` by this user: its folder is missing, not a folder, or not
// writable ("its folder /run/hookgate does not exist"); nullopt when it can.
inline std::optional<std::string> file_folder_problem(const std::filesystem::path& file) {
  const std::filesystem::path folder = file.has_parent_path() ? file.parent_path() : ".";
  std::error_code ec;
  const auto status = std::filesystem::status(folder, ec);
  if (!std::filesystem::exists(status)) return "its folder " + folder.string() + " does not exist";
  if (!std::filesystem::is_directory(status)) return folder.string() + " is not a folder";
  if (::access(folder.c_str(), W_OK | X_OK) != 0)
    return "its folder " + folder.string() + " is not writable";
  return std::nullopt;
}

}  // namespace hookgate
