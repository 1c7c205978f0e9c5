#pragma once
// The API server's side of a mutating admission webhook (docs/design/wire-apis.md §5): builds the
// AdmissionReview v1 for a pod CREATE or UPDATE, POSTs it to the scheduler's /webhook the way
// kube-apiserver does (`?timeout=10s` appended), and turns the answer into the fake API
// server's verdict (JSON patch decoded from base64). With failurePolicy Fail, an unreachable
// webhook or a malformed answer denies the request (500), as the real API server does.
#include <functional>
#include <string>

#include "fake_apiserver.h"

namespace fracgpu::e2e {

/// Calls the webhook at `base_url()` + "/webhook" for `call`. Honours the objectSelector the
/// deployment uses (pods labelled `hami.io/webhook: ignore` are not sent, old and new object
/// alike). `base_url` is read per call, so a restarted scheduler on a new port is followed.
fakes::AdmissionVerdict CallPodWebhook(const std::function<std::string()>& base_url,
                                       const fakes::AdmissionCall& call);

/// Standard base64 (RFC 4648 §4, padded) decoding; nullopt-like empty + false on bad input.
bool DecodeBase64(const std::string& text, std::string* out);

}  // namespace fracgpu::e2e
