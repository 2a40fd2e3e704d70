// Tests only: the session's own connection (read-only), for checks on raw rows that no typed
// reader returns. The store-boundary test (tests/foundation/tst_store_boundary.cpp) keeps it out
// of app, core, views, capture and bench: they read through the typed readers.
#pragma once

#include "session.h"

namespace fs::store {

const Db& debugQuery(const Session& s);

} // namespace fs::store
