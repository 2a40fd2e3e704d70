// The safe pickle reader: every opcode path on hand-made pickles (expected values written out by
// hand, checked once against Python's pickle.loads), every refused opcode, and malformed input.
#include "core/import/pickle_reader.h"

#include <QTemporaryDir>
#include <QTest>

#include <cstdio>
#include <fmt/format.h>

using namespace fs::import;

namespace {

// Python-like repr of a decoded value, so expected values read like the pickle's source.
std::string repr(const PickleDoc& d, PValue v)
{
    switch (v.type()) {
    case PType::None:
        return "None";
    case PType::Bool:
        return v.payload() ? "True" : "False";
    case PType::Int:
    case PType::BigInt: {
        int64_t i = 0;
        uint64_t u = 0;
        if (d.toI64(v, i)) return std::to_string(i);
        if (d.toU64(v, u)) return std::to_string(u);
        return fmt::format("<int of {} bytes>",
                           d.str(PValue::make(PType::Bytes, v.payload())).size());
    }
    case PType::Float: {
        double x = 0;
        d.toDouble(v, x);
        return fmt::format("{}", x);
    }
    case PType::Str:
        return "'" + std::string(d.str(v)) + "'";
    case PType::Bytes:
        return "b'" + std::string(d.str(v)) + "'";
    case PType::List:
    case PType::Tuple:
    case PType::Set:
    case PType::FrozenSet: {
        std::string out;
        d.forEach(v, [&](PValue x) { out += (out.empty() ? "" : ", ") + repr(d, x); });
        if (v.type() == PType::List) return "[" + out + "]";
        if (v.type() == PType::Tuple) return "(" + out + (d.size(v) == 1 ? ",)" : ")");
        if (v.type() == PType::Set) return "{" + out + "}";
        return "frozenset({" + out + "})";
    }
    case PType::Dict: {
        std::string out;
        d.forEachItem(v, [&](PValue k, PValue x) {
            out += (out.empty() ? "" : ", ") + repr(d, k) + ": " + repr(d, x);
        });
        return "{" + out + "}";
    }
    default:
        return "<invalid>";
    }
}

QByteArray bytes(std::initializer_list<int> b)
{
    QByteArray a;
    for (int x : b)
        a.append(static_cast<char>(x));
    return a;
}

} // namespace

class TestPickle : public QObject
{
    Q_OBJECT
    QTemporaryDir dir_;

    QString write(const QByteArray& data)
    {
        static int n = 0;
        const QString path = dir_.filePath(QString("p%1.pickle").arg(n++));
        FILE* f = std::fopen(path.toLocal8Bit().constData(), "wb");
        std::fwrite(data.constData(), 1, static_cast<size_t>(data.size()), f);
        std::fclose(f);
        return path;
    }

private slots:
    void decodes_data()
    {
        QTest::addColumn<QByteArray>("pickle");
        QTest::addColumn<QString>("expected");
        // Protocol 2 header 0x80 0x02, STOP is '.'.
        QTest::newRow("none") << bytes({0x80, 2, 'N', '.'}) << "None";
        QTest::newRow("true/false tuple")
            << bytes({0x80, 2, 0x88, 0x89, 0x86, '.'}) << "(True, False)";
        // BININT 0xfffffffe little-endian = -2; BININT1 255; BININT2 0x0102 = 258.
        QTest::newRow("binint") << bytes({0x80, 2, 'J', 0xfe, 0xff, 0xff, 0xff, 'K', 255, 'M', 2, 1,
                                          0x87, '.'})
                                << "(-2, 255, 258)";
        // LONG1 with 8 bytes 0x00..0x80 = -2^63; LONG1 9 bytes ff*8 00 = 2^64-1 (unsigned).
        QTest::newRow("long1") << bytes({0x80, 2,    0x8a, 8,    0, 0,    0,    0,    0,
                                         0,    0,    0x80, 0x8a, 9, 0xff, 0xff, 0xff, 0xff,
                                         0xff, 0xff, 0xff, 0xff, 0, 0x86, '.'})
                               << "(-9223372036854775808, 18446744073709551615)";
        // LONG1 of 2 bytes 0x00 0xff = -256; LONG1 of 0 bytes = 0.
        QTest::newRow("long1 small")
            << bytes({0x80, 2, 0x8a, 2, 0x00, 0xff, 0x8a, 0, 0x86, '.'}) << "(-256, 0)";
        // LONG4: 4-byte length 3, bytes 01 00 01 = 65537.
        QTest::newRow("long4") << bytes({0x80, 2, 0x8b, 3, 0, 0, 0, 1, 0, 1, '.'}) << "65537";
        QTest::newRow("long4 huge")
            << bytes({0x80, 2, 0x8b, 10, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, '.'})
            << "<int of 10 bytes>";
        // BINFLOAT is big-endian IEEE: 0x3ff8000000000000 = 1.5.
        QTest::newRow("binfloat") << bytes({0x80, 2, 'G', 0x3f, 0xf8, 0, 0, 0, 0, 0, 0, '.'})
                                  << "1.5";
        QTest::newRow("text int/long/float/bool")
            << QByteArray("(I42\nL-7L\nF0.25\nI01\nt.") << "(42, -7, 0.25, True)";
        QTest::newRow("strings") << bytes({0x80, 4, 0x8c, 1, 'a', 'X', 2, 0, 0, 0,   'b',  'c',
                                           0x8d, 1, 0,    0, 0,   0,   0, 0, 0, 'd', 0x87, '.'})
                                 << "('a', 'bc', 'd')";
        // BINSTRING/SHORT_BINSTRING are Python 2 str: decoded as str (pickle's default ASCII).
        QTest::newRow("bytes") << bytes({0x80, 4,    '(', 'C', 1, 'x', 'B', 1,   0,   0,   0,
                                         'y',  0x8e, 1,   0,   0, 0,   0,   0,   0,   0,   'z',
                                         0x96, 1,    0,   0,   0, 0,   0,   0,   0,   'w', 'U',
                                         1,    'v',  'T', 1,   0, 0,   0,   'u', 't', '.'})
                               << "(b'x', b'y', b'z', b'w', 'v', 'u')";
        // '(' MARK ... 't' TUPLE builds the tuple from everything since the MARK.
        QTest::newRow("tuples") << bytes({0x80, 2, ')', 'K', 1, 0x85, '(', 'K', 1, 'K', 2, 'K', 3,
                                          'K', 4, 't', 0x87, '.'})
                                << "((), (1,), (1, 2, 3, 4))";
        QTest::newRow("lists") << bytes({0x80, 2, ']', 'K', 1, 'a', '(', 'K', 2, 'K', 3, 'e', '(',
                                         'K', 9, 'l', 'a', '.'})
                               << "[1, 2, 3, [9]]";
        QTest::newRow("dicts") << bytes({0x80, 2,    '}', 0x8c, 1,   'a', 'K',  1,  's',
                                         '(',  0x8c, 1,   'b',  'K', 2,   0x8c, 1,  'c',
                                         '(',  0x8c, 1,   'd',  'N', 'd', 'u',  '.'})
                               << "{'a': 1, 'b': 2, 'c': {'d': None}}";
        QTest::newRow("sets") << bytes({0x80, 4, 0x8f, '(', 'K', 1, 'K', 2, 0x90, '(', 'K', 3, 0x91,
                                        0x86, '.'})
                              << "({1, 2}, frozenset({3}))";
        // MEMOIZE stores the list at index 0; BINGET 0 fetches the same list, so the APPEND
        // through the reference shows in both places, as in Python.
        QTest::newRow("memo shared")
            << bytes({0x80, 4, ']', 0x94, 'h', 0, 'K', 5, 'a', 0x86, '.'}) << "([5], [5])";
        QTest::newRow("binput/long_binget")
            << bytes({0x80, 2,   'K', 7,   'q', 5, 'r', 0, 1,    0,  0,
                      '0',  'h', 5,   'j', 0,   1, 0,   0, 0x86, '.'})
            << "(7, 7)";
        QTest::newRow("text put/get") << QByteArray("(I5\np3\n0g3\ng3\nt.") << "(5, 5)";
        QTest::newRow("pop/pop_mark/dup")
            << bytes({0x80, 2, 'K', 1, 'K', 2, '0', '(', 'K', 8, 'K', 9, '1', '2', 0x86, '.'})
            << "(1, 1)";
        QTest::newRow("frame") << bytes({0x95, 3, 0, 0, 0, 0, 0, 0, 0, 'K', 3, '.'}) << "3";
        QTest::newRow("protocol 5") << bytes({0x80, 5, 'N', '.'}) << "None";
        // Protocol 0 DICT/LIST/SETITEM opcodes.
        QTest::newRow("text containers")
            << QByteArray("(dI1\n(lI2\nasI3\nI4\ns.") << "{1: [2], 3: 4}";
    }
    void decodes()
    {
        QFETCH(QByteArray, pickle);
        QFETCH(QString, expected);
        ByteReader r(write(pickle).toStdString());
        auto doc = PickleReader::read(r);
        QCOMPARE(QString::fromStdString(repr(*doc, doc->root())), expected);
    }

    void refuses_data()
    {
        QTest::addColumn<QByteArray>("pickle");
        QTest::addColumn<QString>("error");
        // Each refused opcode sits at offset 2, after PROTO 2.
        const std::pair<const char*, int> refused[] = {
            {"GLOBAL", 'c'},    {"STACK_GLOBAL", 0x93}, {"REDUCE", 'R'},
            {"BUILD", 'b'},     {"INST", 'i'},          {"OBJ", 'o'},
            {"NEWOBJ", 0x81},   {"NEWOBJ_EX", 0x92},    {"EXT1", 0x82},
            {"EXT2", 0x83},     {"EXT4", 0x84},         {"PERSID", 'P'},
            {"BINPERSID", 'Q'}, {"NEXT_BUFFER", 0x97},  {"READONLY_BUFFER", 0x98},
        };
        for (auto [name, op] : refused)
            QTest::newRow(name) << bytes({0x80, 2, op, 'o', 's', '\n', 's', 'y', 's', 't', 'e', 'm',
                                          '\n', '.'})
                                << QString("offset 2: refused opcode %1 ").arg(name);
        // A realistic payload: os.system via GLOBAL after some data (offset 5: 0x80 2 'K' 1 '0').
        QTest::newRow("global after data") << QByteArray("\x80\x02K\x01"
                                                         "0cos\nsystem\n(S'id'\ntR.",
                                                         23)
                                           << "offset 5: refused opcode GLOBAL";
        QTest::newRow("empty") << QByteArray() << "offset 0: empty file";
        QTest::newRow("truncated string") << bytes({0x80, 2, 'X', 10, 0, 0, 0, 'a', 'b'})
                                          << "truncated: opcode BINUNICODE declares 10 bytes";
        QTest::newRow("no stop") << bytes({0x80, 2, 'N'})
                                 << "offset 3: truncated: the input ends before the pickle's STOP";
        QTest::newRow("unknown opcode")
            << bytes({0x80, 2, 0xff}) << "offset 2: unknown opcode (byte 0xff)";
        QTest::newRow("underflow") << bytes({0x80, 2, 'a', '.'}) << "offset 2: opcode APPEND";
        QTest::newRow("missing memo")
            << bytes({0x80, 2, 'h', 3, '.'}) << "memo key 3 was never stored";
        QTest::newRow("protocol 6")
            << bytes({0x80, 6, 'N', '.'}) << "pickle protocol 6 is newer than 5";
        QTest::newRow("setitems on list") << bytes({0x80, 2, ']', '(', 'K', 1, 'K', 2, 'u', '.'})
                                          << "expected a dict on the stack, found a list";
        QTest::newRow("stop inside mark")
            << bytes({0x80, 2, '(', 'N', '.'}) << "STOP inside an unclosed MARK";
    }
    void refuses()
    {
        QFETCH(QByteArray, pickle);
        QFETCH(QString, error);
        const std::string path = write(pickle).toStdString();
        ByteReader r(path);
        try {
            PickleReader::read(r);
            QFAIL("no error");
        } catch (const ImportError& e) {
            const QString what = QString::fromStdString(e.what());
            QVERIFY2(what.startsWith(QString::fromStdString(path) + ": "), qPrintable(what));
            QVERIFY2(what.contains(error), qPrintable(what));
        }
    }

    void protocol5AndWideIntegers()
    {
        // Python 3.14's default, protocol 5: PROTO 5, FRAME (8-byte length), then
        // {'big': 2**70, 'neg': -2**70, 'huge': 2**100 + 1} as pickle.dumps writes it:
        //   2**70 = LONG1 of 9 bytes 00*8 40 (two's complement, little-endian);
        //   -2**70 = LONG1 of 9 bytes 00*8 c0; 2**100 + 1 = LONG1 of 13 bytes 01 00*11 10 (the
        //   bytes are exactly pickle.dumps(..., protocol=5)).
        // Decimal values: 2**70 = 1180591620717411303424,
        //   2**100 + 1 = 1267650600228229401496703205377.
        const QByteArray p = bytes(
            {0x80, 5,    0x95, 61, 0, 0, 0, 0, 0, 0, 0, 0x7d, 0x94, '(',  0x8c, 3,    'b', 'i',
             'g',  0x94, 0x8a, 9,  0, 0, 0, 0, 0, 0, 0, 0,    0x40, 0x8c, 3,    'n',  'e', 'g',
             0x94, 0x8a, 9,    0,  0, 0, 0, 0, 0, 0, 0, 0xc0, 0x8c, 4,    'h',  'u',  'g', 'e',
             0x94, 0x8a, 13,   1,  0, 0, 0, 0, 0, 0, 0, 0,    0,    0,    0,    0x10, 'u', '.'});
        ByteReader r(write(p).toStdString());
        auto doc = PickleReader::read(r, {});
        const PValue root = doc->root();
        QCOMPARE(doc->size(root), size_t{3});
        uint64_t u = 0;
        QVERIFY(!doc->toU64(doc->get(root, "big"), u)); // wider than 64 bits
        QCOMPARE(QString::fromStdString(doc->decimal(doc->get(root, "big"))),
                 QString("1180591620717411303424"));
        QCOMPARE(QString::fromStdString(doc->decimal(doc->get(root, "neg"))),
                 QString("-1180591620717411303424"));
        QCOMPARE(QString::fromStdString(doc->decimal(doc->get(root, "huge"))),
                 QString("1267650600228229401496703205377"));
        // LONG4 of the same 2**70 (4-byte length 9).
        const QByteArray p4 = bytes({0x80, 5, 0x8b, 9, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x40, '.'});
        ByteReader r4(write(p4).toStdString());
        auto d4 = PickleReader::read(r4, {});
        QCOMPARE(QString::fromStdString(d4->decimal(d4->root())),
                 QString("1180591620717411303424"));
        // Small values through the same path: 255 (LONG1 ff 00) and -1 (LONG1 ff).
        const QByteArray ps = bytes({0x80, 5, 0x8a, 2, 0xff, 0, 0x8a, 1, 0xff, 0x86, '.'});
        ByteReader rs(write(ps).toStdString());
        auto ds = PickleReader::read(rs, {});
        QCOMPARE(QString::fromStdString(ds->decimal(ds->at(ds->root(), 0))), QString("255"));
        QCOMPARE(QString::fromStdString(ds->decimal(ds->at(ds->root(), 1))), QString("-1"));
    }

    void compactDicts()
    {
        // With compactKeys {a, b}: {'b': 2, 'a': 1} is stored without keys and reads back in
        // key-list order; {'a': 1, 'c': 3} has a key outside the list and stays general; a
        // SETITEM onto a compact dict turns it back into general storage, keeping every item.
        PickleOptions opts;
        opts.compactKeys = {"a", "b"};
        const QByteArray p = bytes({0x80, 4,   '(', '}', '(', 0x8c, 1, 'b', 'K', 2, 0x8c, 1,    'a',
                                    'K',  1,   'u', '}', '(', 0x8c, 1, 'a', 'K', 1, 0x8c, 1,    'c',
                                    'K',  3,   'u', '}', '(', 0x8c, 1, 'a', 'K', 1, 'u',  0x8c, 1,
                                    'z',  'K', 9,   's', 't', '.'});
        ByteReader r(write(p).toStdString());
        auto doc = PickleReader::read(r, opts);
        QCOMPARE(QString::fromStdString(repr(*doc, doc->root())),
                 QString("({'a': 1, 'b': 2}, {'a': 1, 'c': 3}, {'a': 1, 'z': 9})"));
        const PValue first = doc->at(doc->root(), 0);
        QCOMPARE(doc->size(first), size_t{2});
        int64_t b = 0;
        QVERIFY(doc->toI64(doc->get(first, "b"), b));
        QCOMPARE(b, int64_t{2});
        QVERIFY(!doc->get(first, "c").valid());
    }

    void largeListSpansArenaBlocks()
    {
        // 200 000 items in APPENDS batches of 1000 cross the 65 536-value arena blocks: the
        // items must come back in order (sum 0+1+...+199999 = 199999*200000/2 = 19999900000).
        QByteArray p = bytes({0x80, 2, ']'});
        for (int b = 0; b < 200; ++b) {
            p.append('(');
            for (int i = 0; i < 1000; ++i) {
                const int v = b * 1000 + i;
                p.append('J');
                for (int k = 0; k < 4; ++k)
                    p.append(static_cast<char>((v >> (8 * k)) & 0xff));
            }
            p.append('e');
        }
        p.append('.');
        ByteReader r(write(p).toStdString());
        auto doc = PickleReader::read(r);
        QCOMPARE(doc->size(doc->root()), size_t{200000});
        int64_t sum = 0, prev = -1;
        bool ordered = true;
        doc->forEach(doc->root(), [&](PValue v) {
            int64_t x = 0;
            doc->toI64(v, x);
            ordered = ordered && x == prev + 1;
            prev = x;
            sum += x;
        });
        QVERIFY(ordered);
        QCOMPARE(sum, int64_t{19999900000});
    }

    void pagesTouchedAheadChangeNothing()
    {
        // The thread that touches the document's pages ahead of the parse (PickleOptions::
        // touchAheadFrom; off below 16 MiB, so forced here) must leave the document as the parse
        // alone makes it. 150 000 memoized dicts {'a': i, 'b': [i, 'x']} with compact keys grow
        // the container, chunk and memo arrays through many of its steps and take arena blocks
        // it prepared; a BINGET at the end reads one back. Sum of the 'a's:
        // 149999 * 150000 / 2 = 11249925000.
        QByteArray p = bytes(
            {0x80, 4, 0x8c, 1, 'a', 0x94, 0x8c, 1, 'b', 0x94, 0x8c, 1, 'x', 0x94, ']', 0x94, '('});
        for (int i = 0; i < 150000; ++i) {
            p.append(bytes({'}', 0x94, '(', 'h', 0, 'J'}));
            for (int k = 0; k < 4; ++k)
                p.append(static_cast<char>((i >> (8 * k)) & 0xff));
            p.append(bytes({'h', 1, ']', 0x94, '(', 'J'}));
            for (int k = 0; k < 4; ++k)
                p.append(static_cast<char>((i >> (8 * k)) & 0xff));
            p.append(bytes({'h', 2, 'e', 'u'}));
        }
        p.append(bytes({'e', 'h', 4, 'a', '.'})); // memo 4: the first dict, appended again
        const std::string path = write(p).toStdString();
        PickleOptions plain;
        plain.compactKeys = {"a", "b"};
        plain.touchAheadFrom = uint64_t{1} << 62;
        PickleOptions ahead = plain;
        ahead.touchAheadFrom = 0;
        ByteReader r1(path), r2(path);
        auto d1 = PickleReader::read(r1, plain);
        auto d2 = PickleReader::read(r2, ahead);
        QCOMPARE(d2->size(d2->root()), size_t{150001});
        QCOMPARE(repr(*d2, d2->root()), repr(*d1, d1->root()));
        int64_t sum = 0;
        d2->forEach(d2->root(), [&](PValue v) {
            int64_t x = 0;
            d2->toI64(d2->get(v, "a"), x);
            sum += x;
        });
        QCOMPARE(sum, int64_t{11249925000}); // the last item repeats the first, whose 'a' is 0
        QCOMPARE(QString::fromStdString(repr(*d2, d2->at(d2->root(), 150000))),
                 QString("{'a': 0, 'b': [0, 'x']}"));
    }

    void pagesTouchedAheadStopWhenAnArrayMoves()
    {
        // 600 000 memoized Nones ('N', MEMOIZE: 2 bytes each) need more memo entries than the
        // reader reserves from the file's size (a sixth of its bytes): the memo array moves, so
        // the touching thread is stopped first and the parse maps its pages itself from there
        // on. No hang, and all 600 000 come back.
        QByteArray p = bytes({0x80, 4, ']', '('});
        for (int i = 0; i < 600000; ++i)
            p.append(bytes({'N', 0x94}));
        p.append(bytes({'e', '.'}));
        PickleOptions ahead;
        ahead.touchAheadFrom = 0;
        ByteReader r(write(p).toStdString());
        auto doc = PickleReader::read(r, ahead);
        QCOMPARE(doc->size(doc->root()), size_t{600000});
        bool allNone = true;
        doc->forEach(doc->root(), [&](PValue v) { allNone = allNone && v.type() == PType::None; });
        QVERIFY(allNone);
    }
};

QTEST_GUILESS_MAIN(TestPickle)
#include "tst_pickle.moc"
