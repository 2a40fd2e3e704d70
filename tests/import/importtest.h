// Shared helpers of the importer tests: the reference answers, a tiny pickle writer for
// hand-made snapshots, session queries.
#pragma once

#include "testutil.h"

#include "core/store/debug_query.h"
#include "core/store/session.h"

#include <QByteArray>
#include <QDir>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTest>

#include <string>

namespace fstest {

// reference.json of the real-data folder (empty when it is missing: see FSTEST_REQUIRE_DATA).
inline QJsonObject reference()
{
    QFile f(dataDir() + "/reference.json");
    if (!f.open(QIODevice::ReadOnly)) return {};
    return QJsonDocument::fromJson(f.readAll()).object();
}

// `fragscope state FILE --at T --json`, the framework state of device d.
inline QJsonObject stateAt(const QString& file, const QString& at, int device)
{
    const CliResult st = runCli({"state", file, "--at", at, "--json"});
    for (const auto& x : QJsonDocument::fromJson(st.out).object()["states"].toArray())
        if (x.toObject()["device"].toInt() == device &&
            x.toObject()["level"].toString() == "framework")
            return x.toObject();
    return {};
}

inline bool writeFile(const QString& path, const QByteArray& data)
{
    QFile f(path);
    return f.open(QIODevice::WriteOnly) && f.write(data) == data.size();
}

// Writes protocol-2 pickles of plain data: containers are opened with begin*() and closed
// with end*(); inside a dict, call key() before each value.
class PickleWriter
{
public:
    PickleWriter() { b_.append("\x80\x02", 2); }
    PickleWriter& str(const std::string& s)
    {
        b_.append('X');
        appendLe(s.size(), 4);
        b_.append(s.data(), static_cast<qsizetype>(s.size()));
        return *this;
    }
    PickleWriter& key(const std::string& s) { return str(s); }
    PickleWriter& integer(int64_t v)
    {
        b_.append(static_cast<char>(0x8a));
        b_.append(static_cast<char>(8));
        appendLe(static_cast<uint64_t>(v), 8);
        return *this;
    }
    PickleWriter& boolean(bool v)
    {
        b_.append(static_cast<char>(v ? 0x88 : 0x89));
        return *this;
    }
    PickleWriter& beginDict()
    {
        b_.append("}(", 2);
        return *this;
    }
    PickleWriter& endDict()
    {
        b_.append('u');
        return *this;
    }
    PickleWriter& beginList()
    {
        b_.append("](", 2);
        return *this;
    }
    PickleWriter& endList()
    {
        b_.append('e');
        return *this;
    }
    // Opens one entry of the snapshot's "segments" list with its address and total_size; the
    // caller adds the other keys (blocks, stream, segment_type, ...) and closes it with endDict.
    PickleWriter& beginSegment(int64_t address, int64_t totalSize)
    {
        return beginDict().key("address").integer(address).key("total_size").integer(totalSize);
    }
    // One entry of a segment's "blocks" list as PyTorch's snapshot writes it; requested_size and
    // address are left out when negative (older snapshots have neither).
    PickleWriter& block(int64_t size, const char* state, int64_t requested = -1,
                        int64_t address = -1)
    {
        beginDict();
        if (address >= 0) key("address").integer(address);
        key("size").integer(size);
        if (requested >= 0) key("requested_size").integer(requested);
        return key("state").str(state).endDict();
    }
    QByteArray finish() { return b_ + '.'; }

private:
    void appendLe(uint64_t v, int n)
    {
        for (int i = 0; i < n; ++i)
            b_.append(static_cast<char>((v >> (8 * i)) & 0xff));
    }
    QByteArray b_;
};

inline int64_t scalar(fs::Session& s, const char* sql)
{
    return fs::store::debugQuery(s).scalar(sql, -1);
}

} // namespace fstest
