#include "core/signature.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

namespace fracgpu::core {

std::string SignAllocation(const std::string& key, const std::string& pod_uid,
                           const std::string& node, const std::string& allocated) {
  std::string message = pod_uid;
  message.append("\n").append(node).append("\n").append(allocated);
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int mac_len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(message.data()), message.size(), mac, &mac_len);
  std::string out(4 * ((mac_len + 2) / 3) + 1, '\0');
  int n =
      EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()), mac, static_cast<int>(mac_len));
  out.resize(static_cast<size_t>(n));
  return out;
}

bool VerifyAllocation(const std::string& key, const std::string& pod_uid, const std::string& node,
                      const std::string& allocated, const std::string& signature) {
  if (key.empty()) return false;
  std::string want = SignAllocation(key, pod_uid, node, allocated);
  return want.size() == signature.size() &&
         CRYPTO_memcmp(want.data(), signature.data(), want.size()) == 0;
}

}  // namespace fracgpu::core
