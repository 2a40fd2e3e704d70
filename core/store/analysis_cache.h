// The analysis_cache table: values the analysis engine derived from a session, stored in it
// (docs/session-format.md "analysis_cache", docs/analysis.md "Caching"). The engine owns what
// the values mean and how they are encoded; the store keeps them valid: each is keyed by the
// engine version and a stamp, the content's counts and bounds plus the nonce of a guard
// (triggers that delete the nonce on any change to the tables the values depend on), so a
// value matches only while nothing changed since it was computed.
#pragma once

#include "session.h"

#include <functional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace fs::store {

// Counts and bounds of what the cached values depend on; empty for a session that can still
// change (live or abruptly ended): nothing is cached for it. sum: the exact summary just read
// (its table counts save a second pass over the large tables).
std::string contentStamp(const Session& s, const SessionSummary& sum);

// The guard's nonce when it and every trigger are in place, else empty.
std::string readGuard(const Session& s);
// Installs the triggers (those missing) and a new nonce in a writable, finished file through a
// read-write connection of its own; returns the nonce, empty when the file is read-only or
// locked (nothing is cached then).
std::string installGuard(const std::string& path);

// Writes key -> value rows through a separate read-write connection, only when the file is
// writable and the guard named in the stamp ("...|g<nonce>") is still there (nothing changed
// since the values were computed): the engine's connection stays read-only and a read-only
// file gets no cache. `more` produces further values inside the same transaction, one at a
// time (so that a large session's are not all held at once). Returns whether they were stored.
using PutValue = std::function<void(const std::string& key, std::string_view value)>;
bool storeValues(const std::string& path, const std::string& stamp, int engineVersion,
                 const std::vector<std::pair<std::string, std::string_view>>& rows,
                 const std::function<void(const PutValue&)>& more = {});

// The value under key when this engine version stored it with this stamp.
bool fetchValue(const Session& s, const std::string& key, const std::string& stamp,
                int engineVersion, std::string& out);
// The keys stored under this stamp by this engine version that start with prefix.
std::set<std::string> storedKeys(const Session& s, const std::string& stamp, int engineVersion,
                                 std::string_view prefix = {});

// Removes every stored value (they are derived data: the next open rebuilds them). Returns
// whether the file had any.
bool dropValues(const std::string& path);

} // namespace fs::store
