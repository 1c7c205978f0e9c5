// The node lock codec (core/node_lock_codec.h): HAMi's pkg/util/nodelock value format.

#include "core/node_lock_codec.h"

#include <cstdio>
#include <string>

#include "core/request_json.h"

namespace fracgpu::core {
namespace {

using request_json::Quote;

constexpr const char* kTimeForm = "YYYY-MM-DDTHH:MM:SS[.frac] then Z or ±HH:MM";

// The decimal value of s[pos, pos+n) when it is all ASCII digits, else -1.
int Digits(std::string_view s, size_t pos, size_t n) {
  int v = 0;
  for (size_t i = pos; i < pos + n; ++i) {
    if (s[i] < '0' || s[i] > '9') return -1;
    v = v * 10 + (s[i] - '0');
  }
  return v;
}

Status NotRfc3339(std::string_view ts) {
  return InvalidArgument("time " + Quote(ts) + " is not RFC3339 (" + kTimeForm + ")");
}

Status OutOfRange(std::string_view ts, const char* field, int value, int lo, int hi) {
  return InvalidArgument("time " + Quote(ts) + ": " + field + " " + std::to_string(value) +
                         " is out of range " + std::to_string(lo) + ".." + std::to_string(hi));
}

// Go's time.Parse(time.RFC3339, ts) (parseRFC3339 in the Go standard library's time
// package), to UTC seconds.
Result<std::chrono::sys_seconds> ParseRfc3339(std::string_view ts) {
  using namespace std::chrono;
  if (ts.size() < 20 || ts[4] != '-' || ts[7] != '-' || ts[10] != 'T' || ts[13] != ':' ||
      ts[16] != ':')
    return NotRfc3339(ts);
  const int y = Digits(ts, 0, 4), mo = Digits(ts, 5, 2), d = Digits(ts, 8, 2);
  const int h = Digits(ts, 11, 2), mi = Digits(ts, 14, 2), s = Digits(ts, 17, 2);
  if (y < 0 || mo < 0 || d < 0 || h < 0 || mi < 0 || s < 0) return NotRfc3339(ts);
  if (mo < 1 || mo > 12) return OutOfRange(ts, "month", mo, 1, 12);
  const year_month_day last{year{y} / month{static_cast<unsigned>(mo)} / std::chrono::last};
  const int last_day = static_cast<int>(static_cast<unsigned>(last.day()));
  if (d < 1 || d > last_day) return OutOfRange(ts, "day", d, 1, last_day);
  if (h > 23) return OutOfRange(ts, "hour", h, 0, 23);
  if (mi > 59) return OutOfRange(ts, "minute", mi, 0, 59);
  if (s > 59) return OutOfRange(ts, "second", s, 0, 59);
  std::string_view rest = ts.substr(19);
  if (rest[0] == '.') {  // a fraction: at least one digit, dropped
    size_t i = 1;
    while (i < rest.size() && rest[i] >= '0' && rest[i] <= '9') ++i;
    if (i == 1) return NotRfc3339(ts);
    rest.remove_prefix(i);
  }
  int offset_s = 0;
  if (rest == "Z") {
    offset_s = 0;
  } else if (rest.size() == 6 && (rest[0] == '+' || rest[0] == '-') && rest[3] == ':') {
    const int zh = Digits(rest, 1, 2), zm = Digits(rest, 4, 2);
    if (zh < 0 || zm < 0) return NotRfc3339(ts);
    if (zh > 23) return OutOfRange(ts, "zone hour", zh, 0, 23);
    if (zm > 59) return OutOfRange(ts, "zone minute", zm, 0, 59);
    offset_s = (rest[0] == '+' ? 1 : -1) * (zh * 3600 + zm * 60);
  } else {
    return NotRfc3339(ts);
  }
  const sys_days day_point{year{y} / month{static_cast<unsigned>(mo)} /
                           day{static_cast<unsigned>(d)}};
  return sys_seconds{day_point} + hours{h} + minutes{mi} + seconds{s} - seconds{offset_s};
}

}  // namespace

std::string EncodeNodeLock(const NodeLock& lock) {
  using namespace std::chrono;
  const sys_days day_point = floor<days>(lock.time);
  const year_month_day ymd{day_point};
  const int y = static_cast<int>(ymd.year());
  FRACGPU_CHECK(y >= 0 && y <= 9999 && "node lock time outside RFC3339's years 0000..9999");
  const hh_mm_ss<seconds> hms{lock.time - day_point};
  char buf[32];
  std::snprintf(buf, sizeof buf, "%04d-%02u-%02uT%02d:%02d:%02dZ", y,
                static_cast<unsigned>(ymd.month()), static_cast<unsigned>(ymd.day()),
                static_cast<int>(hms.hours().count()), static_cast<int>(hms.minutes().count()),
                static_cast<int>(hms.seconds().count()));
  return std::string(buf) + "," + lock.pod_namespace + "," + lock.pod_name;
}

Result<NodeLock> DecodeNodeLock(std::string_view value) {
  NodeLock out;
  const size_t c1 = value.find(',');
  std::string_view ts = value;
  if (c1 != std::string_view::npos) {
    const size_t c2 = value.find(',', c1 + 1);
    if (c2 == std::string_view::npos || value.find(',', c2 + 1) != std::string_view::npos) {
      size_t fields = 1;
      for (char c : value) fields += c == ',' ? 1 : 0;
      return InvalidArgument(Quote(value) + " has " + std::to_string(fields) +
                             " ','-separated fields, want <time>,<namespace>,<pod name> or a "
                             "bare time");
    }
    ts = value.substr(0, c1);
    out.pod_namespace = std::string(value.substr(c1 + 1, c2 - c1 - 1));
    out.pod_name = std::string(value.substr(c2 + 1));
  }
  Result<std::chrono::sys_seconds> time = ParseRfc3339(ts);
  if (!time.ok()) return time.status();
  out.time = *time;
  return out;
}

}  // namespace fracgpu::core
