#include "debug_query.h"

#include "session_access.h"

namespace fs::store {

const Db& debugQuery(const Session& s)
{
    return SessionAccess::db(s);
}

} // namespace fs::store
