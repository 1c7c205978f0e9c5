#pragma once
// Bounded decoding of outside JSON (AdmissionReviews, extender calls, UI forms, annotation
// values): a nesting-depth limit checked while parsing, and the Kubernetes rule that
// metadata.annotations and metadata.labels map strings to strings.
//
// Why: nlohmann::json parses iteratively, but dump(), copies and comparisons recurse once per
// nesting level, so a ~200 KB array nested 100,000 deep overflowed the webhook's stack. A
// document that passes ParseJsonBounded can be dumped, copied and compared safely.

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "base/status.h"

namespace fracgpu::core {

/// Nesting limit for outside JSON: objects and arrays within each other, the top level counting
/// as 1. A v1.Pod uses about 10 (spec.affinity.nodeAffinity…matchExpressions[].values[]).
inline constexpr int kMaxJsonDepth = 64;

/// Parses `text` as one JSON document (RFC 8259), refusing nesting deeper than `max_depth`
/// while reading (nlohmann's parser callback sees each object/array start with its depth, so
/// the check stops building the DOM at the limit; the parser itself keeps no recursion).
/// Errors (kInvalidArgument): "<what> is not valid JSON: …", "<what> nests objects/arrays
/// deeper than <max_depth> levels" (with an empty `what`: "not valid JSON: …", "JSON nests …").
Result<nlohmann::json> ParseJsonBounded(std::string_view text, const std::string& what,
                                        int max_depth = kMaxJsonDepth);

/// Checks that `object`'s metadata.annotations and metadata.labels, when present and not null,
/// are objects whose every value is a string (k8s.io/api core/v1 ObjectMeta:
/// map[string]string). `where` prefixes the field path in errors, e.g.
/// "AdmissionReview.request.object". Errors (kInvalidArgument) name the field:
/// `<where>.metadata.annotations["k"] must be a string, got an array`. A non-object metadata is
/// refused the same way.
Status CheckObjectMetaStrings(const nlohmann::json& object, const std::string& where);

}  // namespace fracgpu::core
