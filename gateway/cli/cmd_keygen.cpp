#include <openssl/rand.h>
#include <sys/stat.h>

#include <cstdio>
#include <fstream>

#include "bus/curve.hpp"
#include "gateway/cli/cli.hpp"
#include "webhooks/signing.hpp"

namespace hookgate::cli {

int cmd_keygen(const std::vector<std::string>& argv) {
  Args args(argv, {"webhook-secret"});
  const char* usage =
      "Usage: hookgate keygen [--out FILE]      a CURVE keypair for the bus (FILE gets the "
      "keypair,\n"
      "                                         FILE.pub the public half to list in "
      "allowed_clients)\n"
      "       hookgate keygen --webhook-secret  a whsec_ secret (24 random bytes, base64)\n";
  if (auto code = check_usage(args, {"out", "webhook-secret"}, usage)) return *code;
  if (args.has("webhook-secret")) {
    unsigned char bytes[24];
    if (RAND_bytes(bytes, sizeof bytes) != 1) return fail("no randomness available");
    std::printf("whsec_%s\n", webhooks::base64_encode(
                                  std::string_view(reinterpret_cast<char*>(bytes), sizeof bytes))
                                  .c_str());
    return 0;
  }
  auto keys = bus::generate_curve_keypair();
  if (keys.public_key.empty()) return fail("libzmq was built without CURVE support");
  if (auto out = args.get("out")) {
    {
      std::ofstream f(*out);
      if (!f) return fail("cannot write " + *out);
      f << bus::format_keypair_file(keys, true);
    }
    chmod(out->c_str(), 0600);
    std::ofstream(*out + ".pub") << bus::format_keypair_file(keys, false);
    std::printf("wrote %s (keep it secret) and %s.pub\npublic: %s\n", out->c_str(), out->c_str(),
                keys.public_key.c_str());
    return 0;
  }
  std::printf("%s", bus::format_keypair_file(keys, true).c_str());
  return 0;
}

}  // namespace hookgate::cli
