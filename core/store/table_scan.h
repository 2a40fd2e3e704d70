// Internal to core/store: long reads of a rowid table's integer columns (docs/store.md "Long
// reads").
#pragma once

#include "sqlite.h"

#include <cstdint>
#include <functional>
#include <string_view>

namespace fs::store {

enum class RowReading {
    Pages,  // the table's b-tree pages read from the file and decoded here, SQLite for the rest
    Sqlite, // every row through SQLite (Stmt::visitRows): the reference the tests compare with
};

// Visits the rows of the rowid table `table` whose rowid lies in [lo, hi], in rowid order,
// handing visit the values of `columns` ("a, b, c": column names; the table's INTEGER PRIMARY
// KEY column reads the rowid). visit returns false to stop; an exception it throws stops the
// read and propagates. Returns the rows visited (the one whose visit returned false included).
//
// RowReading::Pages reads the leaf pages through the connection's own file handle while a
// statement holds the connection's read transaction, so no writer changes them meanwhile, and
// decodes the records itself: under half of SQLite's time per row. A row it does not decode
// (a value that is not an integer or NULL, a record spilling onto overflow pages) is read by
// SQLite; so is everything after a page that does not parse (SQLite then reports what is
// wrong with the file), and the whole range where the pages are not the whole truth: a
// write-ahead log with frames, a transaction writing on this connection, a column with a
// default value (rows older than the column omit it), a table without rowid or with generated
// columns.
//
// counts, when given, receives how many rows each way read (the tests check the pages are read).
struct RowReadCounts
{
    int64_t fromPages = 0, bySqlite = 0;
};
int64_t visitTableRows(const Db& db, std::string_view table, std::string_view columns, int64_t lo,
                       int64_t hi, const std::function<bool(const RowValues&)>& visit,
                       RowReading how = RowReading::Pages, RowReadCounts* counts = nullptr);

} // namespace fs::store
