// The store's boundary (docs/store.md): only core/store runs SQL on a session file. Every C++
// file under app, core, views, capture and bench is read, and SQL outside core/store fails the
// test (core/import/nsys.cpp reads a foreign database, an `nsys export` file, and is exempt by
// name). Found: SQL in a string literal (adjacent literals joined, as the compiler joins them), a
// literal handed to prepare/exec/scalar/scalarText, and in code the connection types and the
// SQLite calls that open a connection or run a statement (Db, Stmt, SessionAccess, debugQuery,
// sqlite3_open/prepare/exec/step/bind/column...). Comments are not code.
#include <QDirIterator>
#include <QFile>
#include <QtTest>

#include <regex>
#include <string>
#include <vector>

namespace {

struct Hit
{
    int line = 0;
    std::string what;
};

// A string literal's text (escapes kept as written: none of the patterns needs them).
struct Literal
{
    int line = 0;
    std::string text;
    bool callArgument = false; // the first argument of prepare( exec( scalar( scalarText(
};

bool identStart(char c)
{
    return std::isalpha(static_cast<unsigned char>(c)) || c == '_';
}
bool identChar(char c)
{
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
}

// Splits C++ source into string literal groups and code identifiers, skipping comments and
// character literals; calls onIdent(line, name) for identifiers.
template <typename OnIdent> std::vector<Literal> literals(const std::string& src, OnIdent&& onIdent)
{
    std::vector<Literal> out;
    int line = 1;
    size_t i = 0;
    const size_t n = src.size();
    std::string lastIdent; // the identifier before the last '(' (call detection)
    bool afterCallParen = false;
    bool joinable = false; // the previous token was a string literal: the next one joins it
    auto advance = [&](size_t to) {
        for (; i < to && i < n; ++i)
            if (src[i] == '\n') ++line;
    };
    while (i < n) {
        const char c = src[i];
        if (c == '\n' || c == ' ' || c == '\t' || c == '\r') {
            advance(i + 1);
            continue;
        }
        if (c == '/' && i + 1 < n && src[i + 1] == '/') {
            advance(src.find('\n', i) == std::string::npos ? n : src.find('\n', i));
            continue;
        }
        if (c == '/' && i + 1 < n && src[i + 1] == '*') {
            const size_t e = src.find("*/", i + 2);
            advance(e == std::string::npos ? n : e + 2);
            continue;
        }
        if (c == '#') { // a preprocessor line: its <header> or "header" is no literal
            size_t e = i;
            while (e < n && src[e] != '\n')
                e += src[e] == '\\' && e + 1 < n ? 2 : 1;
            advance(e);
            joinable = afterCallParen = false;
            continue;
        }
        // String literals, with an encoding prefix or raw.
        size_t q = i;
        while (q < n && q - i < 3 &&
               (src[q] == 'u' || src[q] == '8' || src[q] == 'U' || src[q] == 'L' || src[q] == 'R'))
            ++q;
        if (q < n && src[q] == '"') { // (identifiers and numbers are read whole below)
            const bool raw = q > i && src[q - 1] == 'R';
            const int startLine = line;
            std::string text;
            size_t e;
            if (raw) {
                const size_t open = src.find('(', q);
                const std::string delim = ")" + src.substr(q + 1, open - q - 1) + "\"";
                const size_t close = src.find(delim, open);
                e = close == std::string::npos ? n : close + delim.size();
                text = src.substr(open + 1, (close == std::string::npos ? n : close) - open - 1);
            } else {
                e = q + 1;
                while (e < n && src[e] != '"' && src[e] != '\n') {
                    if (src[e] == '\\' && e + 1 < n) text += src[e++];
                    text += src[e++];
                }
                ++e;
            }
            if (joinable && !out.empty()) {
                out.back().text += text;
            } else {
                out.push_back({startLine, text, afterCallParen});
            }
            advance(e);
            joinable = true;
            afterCallParen = false;
            continue;
        }
        joinable = false;
        if (c == '\'') { // a character literal
            size_t e = i + 1;
            while (e < n && src[e] != '\'' && src[e] != '\n')
                e += src[e] == '\\' ? 2 : 1;
            advance(e + 1);
            afterCallParen = false;
            continue;
        }
        if (std::isdigit(static_cast<unsigned char>(c))) { // a number, digit separators included
            size_t e = i + 1;
            while (e < n && (identChar(src[e]) || src[e] == '.' || src[e] == '\''))
                ++e;
            advance(e);
            afterCallParen = false;
            continue;
        }
        if (identStart(c)) {
            size_t e = i + 1;
            while (e < n && identChar(src[e]))
                ++e;
            lastIdent = src.substr(i, e - i);
            onIdent(line, lastIdent);
            advance(e);
            afterCallParen = false;
            continue;
        }
        afterCallParen =
            c == '(' && (lastIdent == "prepare" || lastIdent == "exec" || lastIdent == "scalar" ||
                         lastIdent == "scalarText" || lastIdent.starts_with("sqlite3_"));
        lastIdent.clear();
        advance(i + 1);
    }
    return out;
}

// SQL in a literal: statement keywords as SQL writes them (upper case), or a lower-case query
// naming a table of the session format.
bool looksLikeSql(const std::string& text)
{
    static const std::regex upper(
        R"(\bSELECT\s+[\w*(]|\b(INSERT|REPLACE)\s+(OR\s+\w+\s+)?INTO\b|\bUPDATE\s+\w+\s+SET\b|)"
        R"(\bDELETE\s+FROM\b|\b(CREATE|DROP)\s+(TEMP\s+|TEMPORARY\s+|UNIQUE\s+|VIRTUAL\s+)?)"
        R"((TABLE|INDEX|TRIGGER|VIEW)\b|\bALTER\s+TABLE\b|\bPRAGMA\s+\w|)"
        R"(^\s*(BEGIN|COMMIT|ROLLBACK|VACUUM|ANALYZE|SAVEPOINT|RELEASE|ATTACH)\b)");
    static const std::regex lower(
        R"(\bselect\s+[\s\S]+\bfrom\s+(meta|strings|sources|devices|processes|regions|)"
        R"(region_mappings|allocations|stacks|kernels|graph_launches|markers|frames|)"
        R"(frame_metrics|ooms|pending_frees|capture_health|anomalies|sim_truth_frames|)"
        R"(sim_truth_kernels|analysis_cache|sqlite_master|sqlite_schema)\b)",
        std::regex::icase);
    return std::regex_search(text, upper) || std::regex_search(text, lower);
}

std::vector<Hit> sqlHits(const std::string& src)
{
    std::vector<Hit> hits;
    const auto lits = literals(src, [&](int line, const std::string& id) {
        static const std::regex api(
            "sqlite3_(open|prepare|exec|step|bind|column|get_table|blob_open)\\w*");
        if (id == "Db" || id == "Stmt" || id == "SessionAccess" || id == "debugQuery" ||
            std::regex_match(id, api))
            hits.push_back({line, "uses " + id});
    });
    for (const Literal& l : lits) {
        if (looksLikeSql(l.text))
            hits.push_back({l.line, "SQL in \"" + l.text.substr(0, 60) + "\""});
        else if (l.callArgument)
            hits.push_back({l.line, "a query literal \"" + l.text.substr(0, 60) + "\""});
    }
    return hits;
}

} // namespace

class TstStoreBoundary : public QObject
{
    Q_OBJECT

private slots:
    void finds_data()
    {
        QTest::addColumn<QString>("source");
        QTest::addColumn<int>("hits");
        QTest::newRow("a query") << "db.prepare(\"SELECT id FROM allocations\");" << 1;
        QTest::newRow("joined literals") << "auto q = \"SELECT id \"\n   \"FROM x\";" << 1;
        QTest::newRow("raw literal") << "const char* s = R\"(DELETE FROM frames)\";" << 1;
        QTest::newRow("escaped quotes") << "f(\"a \\\" SELECT 1 \\\" b\");" << 1;
        QTest::newRow("lower-case query") << "q.run(\"select * from kernels\");" << 1;
        QTest::newRow("a literal handed to exec") << "s.exec(\"begin\");" << 1;
        QTest::newRow("a pragma after a separator")
            << "int n = 1'000'000; const char* p = \"PRAGMA user_version\";" << 1;
        QTest::newRow("a trigger") << "g(\"CREATE TRIGGER IF NOT EXISTS t\")" << 1;
        QTest::newRow("a transaction") << "h(\"BEGIN IMMEDIATE\");" << 1;
        QTest::newRow("a connection type") << "Stmt st; Db other;" << 2;
        QTest::newRow("the SQLite API") << "sqlite3_exec(db, 0, 0, 0, 0);" << 1;
        QTest::newRow("line comment") << "// SELECT id FROM allocations; Stmt\nint x;" << 0;
        QTest::newRow("block comment") << "/* INSERT INTO meta VALUES(1) */ int y;" << 0;
        QTest::newRow("English") << "print(\"select a frame from the list\");" << 0;
        QTest::newRow("words that are not statements")
            << "print(\"Begin recording; UPDATE the pragma\"); print(\"frames from 0\");" << 0;
        QTest::newRow("a quote character") << "c == '\"' ? \"x\" : \"y\";" << 0;
        QTest::newRow("an include")
            << "#include \"core/store/session.h\"\n#include <sqlite3.h>" << 0;
        QTest::newRow("another identifier")
            << "DbMutex m; StmtLike s; prepare(); v = sqlite3_libversion();" << 0;
    }

    void finds()
    {
        QFETCH(QString, source);
        QFETCH(int, hits);
        const auto found = sqlHits(source.toStdString());
        std::string list;
        for (const Hit& h : found)
            list += std::to_string(h.line) + ": " + h.what + "\n";
        QVERIFY2(static_cast<int>(found.size()) == hits, list.c_str());
    }

    // The tree: SQL only in core/store (and the nsys reader). The store's own files are scanned
    // too, as a check that the scanner sees the SQL there.
    void sqlOnlyInTheStore()
    {
        const QString root = QStringLiteral(FRAGSCOPE_SOURCE_DIR);
        int files = 0, storeHits = 0;
        std::string outside;
        for (const char* dir : {"app", "core", "views", "capture", "bench"}) {
            QDirIterator it(root + "/" + dir, {"*.cpp", "*.h", "*.cu"}, QDir::Files,
                            QDirIterator::Subdirectories);
            while (it.hasNext()) {
                const QString path = it.next();
                const QString rel = QDir(root).relativeFilePath(path);
                if (rel == "core/import/nsys.cpp") continue;
                QFile f(path);
                QVERIFY2(f.open(QIODevice::ReadOnly), qPrintable(path));
                ++files;
                const auto hits = sqlHits(f.readAll().toStdString());
                if (rel.startsWith("core/store/")) {
                    storeHits += static_cast<int>(hits.size());
                    continue;
                }
                for (const Hit& h : hits)
                    outside +=
                        rel.toStdString() + ":" + std::to_string(h.line) + ": " + h.what + "\n";
            }
        }
        QVERIFY2(files > 150, qPrintable(QString("only %1 files under %2").arg(files).arg(root)));
        QVERIFY2(storeHits > 50, "the scanner finds no SQL in core/store");
        QVERIFY2(outside.empty(), ("SQL outside core/store (docs/store.md):\n" + outside).c_str());
    }
};

QTEST_MAIN(TstStoreBoundary)
#include "tst_store_boundary.moc"
