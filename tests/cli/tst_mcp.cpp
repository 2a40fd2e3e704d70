// `fragscope mcp` driven as an MCP client drives it (docs/mcp.md): initialize, tools/list, a
// tools/call of every tool on simulated sessions, each result compared with the command's own
// --json output, and the protocol's errors (unknown method, malformed line, bad arguments).
#include "testutil.h"

#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QSet>
#include <QTemporaryDir>
#include <QTest>

class TstMcp : public QObject
{
    Q_OBJECT
    QTemporaryDir dir_;
    QString a_, b_;
    QProcess server_;
    int nextId_ = 100;

    static QProcessEnvironment env()
    {
        auto e = QProcessEnvironment::systemEnvironment();
        e.insert("FRAGSCOPE_NO_PROGRESS", "1");
        return e;
    }

    void send(const QByteArray& line)
    {
        server_.write(line + "\n");
        QVERIFY(server_.waitForBytesWritten(10000));
    }

    // The next line the server writes, parsed; an empty object when none comes in time.
    QJsonObject receive()
    {
        while (!server_.canReadLine())
            if (!server_.waitForReadyRead(180000)) return {};
        const QByteArray line = server_.readLine();
        QJsonParseError err;
        const QJsonDocument d = QJsonDocument::fromJson(line, &err);
        if (err.error != QJsonParseError::NoError) qWarning() << "not JSON:" << line.left(300);
        return d.object();
    }

    QJsonObject request(const QString& method, const QJsonObject& params = {})
    {
        const int id = nextId_++;
        QJsonObject msg{{"jsonrpc", "2.0"}, {"id", id}, {"method", method}};
        if (!params.isEmpty()) msg["params"] = params;
        send(QJsonDocument(msg).toJson(QJsonDocument::Compact));
        const QJsonObject r = receive();
        if (r["id"].toInt() != id) qWarning() << "answer to another id:" << r;
        return r;
    }

    QJsonObject callTool(const QString& name, const QJsonObject& args)
    {
        return request("tools/call", {{"name", name}, {"arguments", args}})["result"].toObject();
    }

private slots:
    void initTestCase()
    {
        QVERIFY(dir_.isValid());
        a_ = dir_.filePath("a.fragscope");
        b_ = dir_.filePath("b.fragscope");
        QCOMPARE(fstest::runCli({"simulate", "-o", a_, "--frames", "4", "--steps", "3", "--seed",
                                 "9", "--capacity", "30G"})
                     .exitCode,
                 0);
        QCOMPARE(
            fstest::runCli({"simulate", "-o", b_, "--frames", "4", "--steps", "3", "--seed", "10"})
                .exitCode,
            0);
        server_.setProcessEnvironment(env());
        server_.setProcessChannelMode(QProcess::SeparateChannels);
        server_.start(QStringLiteral(FRAGSCOPE_CLI), {"mcp"});
        QVERIFY(server_.waitForStarted());
    }

    void initialize()
    {
        const QJsonObject r =
            request("initialize", {{"protocolVersion", "2025-06-18"},
                                   {"capabilities", QJsonObject{}},
                                   {"clientInfo", QJsonObject{{"name", "tst"}, {"version", "1"}}}});
        QCOMPARE(r["jsonrpc"].toString(), QString("2.0"));
        const QJsonObject res = r["result"].toObject();
        // A revision the server speaks is answered with itself.
        QCOMPARE(res["protocolVersion"].toString(), QString("2025-06-18"));
        QVERIFY(res["capabilities"].toObject().contains("tools"));
        QCOMPARE(res["serverInfo"].toObject()["name"].toString(), QString("fragscope"));
        // A notification gets no answer: the next line answers the ping after it.
        send(R"({"jsonrpc":"2.0","method":"notifications/initialized"})");
        const QJsonObject ping = request("ping");
        QVERIFY(ping.contains("result"));
        QCOMPARE(ping["result"].toObject().size(), 0);
    }

    void toolsList()
    {
        const QJsonArray list = request("tools/list")["result"].toObject()["tools"].toArray();
        QMap<QString, QJsonObject> byName;
        for (const auto& t : list)
            byName[t.toObject()["name"].toString()] = t.toObject();
        QCOMPARE(
            QSet<QString>(byName.keyBegin(), byName.keyEnd()),
            (QSet<QString>{"info", "report", "state", "collapse", "graphs", "whatif", "compare"}));
        for (const QJsonObject& t : byName) {
            QVERIFY(!t["description"].toString().isEmpty());
            const QJsonObject s = t["inputSchema"].toObject();
            QCOMPARE(s["type"].toString(), QString("object"));
            const QJsonObject props = s["properties"].toObject();
            // Always --json: the flag is not an argument.
            QVERIFY(!props.contains("json"));
            for (const auto& req : s["required"].toArray())
                QVERIFY2(props.contains(req.toString()), qPrintable(req.toString()));
        }
        auto required = [&](const char* tool) {
            QStringList r;
            for (const auto& v : byName[tool]["inputSchema"].toObject()["required"].toArray())
                r << v.toString();
            return r;
        };
        QCOMPARE(required("info"), QStringList{"session"});
        QCOMPARE(required("compare"), (QStringList{"a", "b"}));
        QVERIFY(required("state").contains("at"));
        QVERIFY(required("collapse").contains("frame"));
        auto prop = [&](const char* tool, const char* p) {
            return byName[tool]["inputSchema"].toObject()["properties"].toObject()[p].toObject();
        };
        // Option types from the command's options: --top K an integer, --pools a flag,
        // --alloc-conf repeatable, --entropy-window (dash to underscore) a string.
        QCOMPARE(prop("report", "top")["type"].toString(), QString("integer"));
        QCOMPARE(prop("state", "pools")["type"].toString(), QString("boolean"));
        QCOMPARE(prop("whatif", "alloc_conf")["type"].toString(), QString("array"));
        QCOMPARE(prop("whatif", "alloc_conf")["items"].toObject()["type"].toString(),
                 QString("string"));
        QCOMPARE(prop("report", "entropy_window")["type"].toString(), QString("string"));
    }

    void callEqualsCli_data()
    {
        QTest::addColumn<QString>("tool");
        QTest::addColumn<QJsonObject>("args");
        QTest::addColumn<QStringList>("cli");
        const QString a = dir_.filePath("a.fragscope"), b = dir_.filePath("b.fragscope");
        QTest::newRow("info") << "info" << QJsonObject{{"session", a}}
                              << QStringList{"info", a, "--json"};
        QTest::newRow("report") << "report" << QJsonObject{{"session", a}, {"top", 3}}
                                << QStringList{"report", a, "--top", "3", "--json"};
        QTest::newRow("state") << "state"
                               << QJsonObject{{"session", a}, {"at", "end"}, {"pools", true}}
                               << QStringList{"state", a, "--at", "end", "--pools", "--json"};
        QTest::newRow("collapse") << "collapse"
                                  << QJsonObject{{"session", a}, {"frame", 2}, {"any", true}}
                                  << QStringList{"collapse", a, "--frame", "2", "--any", "--json"};
        QTest::newRow("graphs") << "graphs" << QJsonObject{{"session", a}}
                                << QStringList{"graphs", a, "--json"};
        QTest::newRow("whatif")
            << "whatif"
            << QJsonObject{{"session", a}, {"alloc_conf", QJsonArray{"expandable_segments:True"}}}
            << QStringList{"whatif", a, "--alloc-conf", "expandable_segments:True", "--json"};
        QTest::newRow("compare") << "compare" << QJsonObject{{"a", a}, {"b", b}, {"samples", 10}}
                                 << QStringList{"compare", a, b, "--samples", "10", "--json"};
    }

    void callEqualsCli()
    {
        QFETCH(QString, tool);
        QFETCH(QJsonObject, args);
        QFETCH(QStringList, cli);
        const auto direct = fstest::runCli(cli);
        QCOMPARE(direct.exitCode, 0);
        const QJsonObject expected = QJsonDocument::fromJson(direct.out).object();
        QVERIFY(expected.contains("schema_version"));
        const QJsonObject res = callTool(tool, args);
        QCOMPARE(res["isError"].toBool(), false);
        const QJsonArray content = res["content"].toArray();
        QCOMPARE(content.size(), 1);
        QCOMPARE(content[0].toObject()["type"].toString(), QString("text"));
        // The text is what the command printed, byte for byte; structuredContent the same
        // object parsed (the commands' output is deterministic for a given session).
        QCOMPARE(content[0].toObject()["text"].toString().toUtf8(), direct.out);
        QCOMPARE(res["structuredContent"].toObject(), expected);
    }

    void badPathIsToolError()
    {
        const QString missing = dir_.filePath("no-such-dir/missing.fragscope");
        const QJsonObject res = callTool("info", {{"session", missing}});
        QCOMPARE(res["isError"].toBool(), true);
        const QString text = res["content"].toArray()[0].toObject()["text"].toString();
        QVERIFY2(text.contains(missing), qPrintable(text));
        QVERIFY2(text.contains("status 2"), qPrintable(text)); // the CLI's "bad input" status
        QVERIFY(!res.contains("structuredContent"));
    }

    void badArgumentsAreToolErrors()
    {
        // Missing required option, wrong type, unknown argument: results the model can read.
        QJsonObject res = callTool("state", {{"session", a_}});
        QCOMPARE(res["isError"].toBool(), true);
        QVERIFY(res["content"].toArray()[0].toObject()["text"].toString().contains("'at'"));
        res = callTool("report", {{"session", a_}, {"top", "three"}});
        QCOMPARE(res["isError"].toBool(), true);
        QVERIFY(res["content"].toArray()[0].toObject()["text"].toString().contains("integer"));
        res = callTool("info", {{"session", a_}, {"colour", true}});
        QCOMPARE(res["isError"].toBool(), true);
        QVERIFY(res["content"].toArray()[0].toObject()["text"].toString().contains("'colour'"));
        // The CLI's own refusal (exit 64) comes back the same way.
        res = callTool("state", {{"session", a_}, {"at", "not-a-time"}});
        QCOMPARE(res["isError"].toBool(), true);
        QVERIFY(res["content"].toArray()[0].toObject()["text"].toString().contains("--at"));
    }

    void protocolErrors()
    {
        // Unknown tool and missing name: invalid params.
        QJsonObject r = request("tools/call", {{"name", "format-disk"}});
        QCOMPARE(r["error"].toObject()["code"].toInt(), -32602);
        QVERIFY(r["error"].toObject()["message"].toString().contains("format-disk"));
        r = request("tools/call", {{"arguments", QJsonObject{}}});
        QCOMPARE(r["error"].toObject()["code"].toInt(), -32602);
        // Unknown method.
        r = request("resources/list");
        QCOMPARE(r["error"].toObject()["code"].toInt(), -32601);
        // A malformed line: parse error with id null, and the server goes on.
        send("{\"jsonrpc\": \"2.0\", \"id\": 7, \"method\": ");
        r = receive();
        QCOMPARE(r["error"].toObject()["code"].toInt(), -32700);
        QVERIFY(r.contains("id") && r["id"].isNull());
        // Not an object (a batch): invalid request.
        send("[1, 2]");
        QCOMPARE(receive()["error"].toObject()["code"].toInt(), -32600);
        QVERIFY(request("ping").contains("result"));
    }

    void negotiationAndEof()
    {
        // An unknown revision is answered with the newest; end of input ends the server, status 0.
        QProcess p;
        p.setProcessEnvironment(env());
        p.start(QStringLiteral(FRAGSCOPE_CLI), {"mcp"});
        QVERIFY(p.waitForStarted());
        p.write(
            R"({"jsonrpc":"2.0","id":"x","method":"initialize","params":{"protocolVersion":"1999-01-01"}})"
            "\n");
        p.write(QByteArray(R"({"jsonrpc":"2.0","id":"y","method":"tools/call","params":{"name":)"
                           R"("info","arguments":{"session":")") +
                a_.toUtf8() + "\"}}}\n");
        p.closeWriteChannel();
        QVERIFY(p.waitForFinished(60000));
        QCOMPARE(p.exitStatus(), QProcess::NormalExit);
        QCOMPARE(p.exitCode(), 0);
        const QList<QByteArray> lines = p.readAllStandardOutput().trimmed().split('\n');
        QCOMPARE(lines.size(), 2); // stdout holds the two answers and nothing else
        const QJsonObject init = QJsonDocument::fromJson(lines[0]).object();
        QCOMPARE(init["id"].toString(), QString("x"));
        QCOMPARE(init["result"].toObject()["protocolVersion"].toString(), QString("2025-11-25"));
        const QJsonObject call = QJsonDocument::fromJson(lines[1]).object();
        QCOMPARE(call["id"].toString(), QString("y"));
        QCOMPARE(call["result"].toObject()["isError"].toBool(), false);
        QVERIFY(call["result"].toObject().contains("structuredContent"));
    }

    void cleanupTestCase()
    {
        server_.closeWriteChannel();
        QVERIFY(server_.waitForFinished(30000));
        QCOMPARE(server_.exitCode(), 0);
    }
};

QTEST_GUILESS_MAIN(TstMcp)
#include "tst_mcp.moc"
