#pragma once
// A k8s::Client for tests that talk to a FakeApiServer (or any test server): no retries, so a
// fault a test injects (FailNext) is seen by the code under test instead of being retried away.
// Header-only: a test that includes it already links fracgpu_k8s; fracgpu_fake_apiserver itself
// stays free of src/k8s.

#include <memory>
#include <string>

#include "k8s/client.h"
#include "k8s/config.h"

namespace fracgpu::fakes {

/// A client to the API server at `url` ("http://127.0.0.1:<port>") with `retries = 0` and the
/// other ClientOptions at their defaults. Errors: whatever k8s::Client::Create returns.
inline Result<std::unique_ptr<k8s::Client>> NoRetryClient(const std::string& url) {
  k8s::Config config;
  config.server = url;
  k8s::ClientOptions options;
  options.retries = 0;
  return k8s::Client::Create(config, options);
}

}  // namespace fracgpu::fakes
