#include <fcntl.h>
#include <openssl/rand.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "bus/curve.hpp"
#include "gateway/cli/cli.hpp"
#include "webhooks/signing.hpp"

namespace hookgate::cli {
namespace {

// Writes `text` to a new file beside `path` created with mode 0600, then renames it over `path`.
Status write_private_file(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp-" + std::to_string(getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return make_error("cannot write " + path + ": " + std::strerror(errno));
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  const bool ok = done == text.size() && ::fsync(fd) == 0;
  const int saved = errno;
  ::close(fd);
  if (!ok || ::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(ok ? errno : saved);
    ::unlink(tmp.c_str());
    return make_error("cannot write " + path + ": " + why);
  }
  return {};
}

}  // namespace

int cmd_keygen(const std::vector<std::string>& argv) {
  Args args(argv, {"webhook-secret", "force"});
  const char* usage =
      "Usage: hookgate keygen [--out FILE]      a CURVE keypair for the bus (FILE gets the "
      "keypair,\n"
      "                                         FILE.pub the public half to list in "
      "allowed_clients)\n"
      "       hookgate keygen --webhook-secret [--out FILE]\n"
      "                                         a whsec_ secret (24 random bytes, base64), "
      "printed\n"
      "                                         or written to FILE (mode 0600)\n"
      "An existing FILE is kept unless --force: replacing a key or a secret breaks every peer\n"
      "that still has the old one.\n";
  if (auto code = check_usage(args, {"out", "webhook-secret", "force"}, usage)) return *code;
  if (auto out = args.get("out"); out && !args.has("force")) {
    std::error_code ec;
    // A keypair also writes FILE.pub, which may sit in an allow-list folder for an older key.
    std::vector<std::string> written{*out};
    if (!args.has("webhook-secret")) written.push_back(*out + ".pub");
    for (const auto& file : written)
      if (std::filesystem::exists(file, ec))
        return fail(file +
                    " exists; replacing it breaks every peer that still has the old key or "
                    "secret (pass --force to replace it)");
  }
  if (args.has("webhook-secret")) {
    unsigned char bytes[24];
    if (RAND_bytes(bytes, sizeof bytes) != 1) return fail("no randomness available");
    const std::string secret =
        "whsec_" +
        webhooks::base64_encode(std::string_view(reinterpret_cast<char*>(bytes), sizeof bytes)) +
        "\n";
    // --out keeps the secret off the terminal (and out of CI logs): it used to be ignored here.
    if (auto out = args.get("out")) {
      if (auto st = write_private_file(*out, secret); !st) return fail(st.error().message);
      std::printf("wrote %s (keep it secret)\n", out->c_str());
      return 0;
    }
    std::printf("%s", secret.c_str());
    return 0;
  }
  auto keys = bus::generate_curve_keypair();
  if (keys.public_key.empty()) return fail("libzmq was built without CURVE support");
  if (auto out = args.get("out")) {
    // The secret half is created 0600 (never readable by others, not even for a moment) and
    // must not overwrite a key in place: an existing file is replaced only after it is written.
    if (auto st = write_private_file(*out, bus::format_keypair_file(keys, true)); !st)
      return fail(st.error().message);
    {
      std::ofstream pub(*out + ".pub");
      pub << bus::format_keypair_file(keys, false);
      if (!pub.flush()) return fail("cannot write " + *out + ".pub");
    }
    std::printf("wrote %s (keep it secret) and %s.pub\npublic: %s\n", out->c_str(), out->c_str(),
                keys.public_key.c_str());
    return 0;
  }
  std::printf("%s", bus::format_keypair_file(keys, true).c_str());
  return 0;
}

}  // namespace hookgate::cli
