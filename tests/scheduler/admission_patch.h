#pragma once
// What the webhook tests share: reading an AdmissionReview response's patch back onto the pod.

#include <gtest/gtest.h>
#include <openssl/evp.h>

#include <nlohmann/json.hpp>
#include <string>

namespace fracgpu::scheduler {

/// Standard base64 (RFC 4648 §4) decoded with OpenSSL; the input is trusted test data.
inline std::string Unbase64(const std::string& in) {
  std::string out(in.size() / 4 * 3 + 3, '\0');
  int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                          reinterpret_cast<const unsigned char*>(in.data()),
                          static_cast<int>(in.size()));
  size_t pad = (!in.empty() && in.back() == '=') + (in.size() > 1 && in[in.size() - 2] == '=');
  out.resize(static_cast<size_t>(n) - pad);
  return out;
}

/// The pod after applying the review response's JSONPatch (nlohmann's RFC 6902 implementation;
/// also proves the patch applies); the pod unchanged when the response has no patch.
inline nlohmann::json Patched(const nlohmann::json& pod, const nlohmann::json& review) {
  const nlohmann::json& resp = review["response"];
  if (!resp.contains("patch")) return pod;
  EXPECT_EQ(resp["patchType"], "JSONPatch");
  return pod.patch(nlohmann::json::parse(Unbase64(resp["patch"].get<std::string>())));
}

}  // namespace fracgpu::scheduler
