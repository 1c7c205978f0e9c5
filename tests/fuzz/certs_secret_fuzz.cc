// Fuzz target: what `fracgpu certs` reads back from the API server — a Secret's base64 `data`
// values and the PEM inside them (src/certs/pki.h: Base64Decode, InspectCert, KeyMatchesCert,
// VerifyIssuedBy). The input is split at the first NUL into (certificate, key); each half is
// tried both raw and base64-decoded. None of it may crash or leak, whatever it holds.
#include <cstddef>
#include <cstdint>
#include <string>

#include "certs/pki.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string input(reinterpret_cast<const char*>(data), size);
  auto nul = input.find('\0');
  std::string cert = input.substr(0, nul);
  std::string key = nul == std::string::npos ? "" : input.substr(nul + 1);
  for (int round = 0; round < 2; ++round) {
    auto info = fracgpu::certs::InspectCert(cert);
    if (info.ok()) (void)fracgpu::certs::VerifyIssuedBy(cert, cert, info->not_before + 1);
    (void)fracgpu::certs::KeyMatchesCert(cert, key);
    auto c = fracgpu::certs::Base64Decode(cert);
    auto k = fracgpu::certs::Base64Decode(key);
    if (!c.ok()) break;
    cert = *c;
    key = k.ok() ? *k : key;
  }
  return 0;
}
