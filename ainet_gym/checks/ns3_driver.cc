// The ns-3 side of `ainet-gym crosscheck` (compiled at run time by cppyy's JIT, see crosscheck.py).
//
// The Python side builds the fabric (nodes, point-to-point links, pinned host routes) and hands this
// orchestrator the jobs: compute time, overlap, start time, and phases of transfers. The orchestrator runs
// the same job timeline as the fluid engine (ainet_gym/sim/engine.py): an iteration computes for `compute`,
// its communication starts after (1 - overlap) * compute and runs the phases in order, each phase's
// transfers as bulk TCP connections (one per routed sub-flow of the transfer's connection); the iteration
// ends when both compute and communication are done and the next one starts at once. Latency is not an
// added alpha term here: the packets pay the links' propagation and serialisation delays.
//
// A transfer of connection c started in decision interval k uses the routing of (c, k): a list of
// sub-flows (source node and address, destination node and address, fraction of the bytes). Pinned
// paths have their own address pair (the switches carry /32 routes for it), sprayed connections use the
// hosts' primary addresses (per-packet random ECMP of Ipv4GlobalRouting).
//
// A flow of several transfers that form a cycle is a pipelined ring (NCCL's): each hop is one TCP
// connection fed by credit (XcSender), allowed to send what the previous hop has delivered to its source,
// rounded down to whole chunks, plus one ring step (its own data of the first step). The hops are then
// coupled chunk by chunk and the ring moves at the pace of its slowest hop.

#include <chrono>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

namespace ainet_xc
{

class Orchestrator;

struct XcSub
{
    uint32_t srcNode;
    uint32_t dstNode;
    ns3::Ipv4Address src;
    ns3::Ipv4Address dst;
    double frac;
};

struct XcTransfer
{
    uint32_t conn;
    double bytes;
    int32_t pred; // ring: index (in its flow) of the hop that feeds this one; -1: not coupled
    double lag;   // ring: bytes this hop may send ahead of what its predecessor delivered (one ring step)
};

struct XcHop;

// A TCP sender fed by credit: it writes into its socket only the bytes it is allowed so far (a hop of a
// pipelined ring may send chunk k once it has received chunk k from the previous hop), like NCCL's proxy.
struct XcSender
{
    XcHop* hop;
    ns3::Ptr<ns3::Socket> sock;
    uint64_t total;
    uint64_t allowed;
    uint64_t sent;
    uint32_t sendSize;
    bool connected;
    bool closed;

    void Pump()
    {
        if (!connected || closed)
        {
            return;
        }
        while (sent < allowed)
        {
            uint32_t avail = sock->GetTxAvailable();
            if (avail == 0)
            {
                return;
            }
            uint64_t n = std::min<uint64_t>(std::min<uint64_t>(sendSize, allowed - sent), avail);
            int r = sock->Send(ns3::Create<ns3::Packet>((uint32_t)n));
            if (r <= 0)
            {
                return;
            }
            sent += (uint64_t)r;
        }
        if (sent >= total)
        {
            closed = true;
            sock->Close();
        }
    }

    void Connected(ns3::Ptr<ns3::Socket>)
    {
        connected = true;
        Pump();
    }

    void Failed(ns3::Ptr<ns3::Socket>) {}

    void Space(ns3::Ptr<ns3::Socket>, uint32_t) { Pump(); }
};

// One hop of a pipelined ring (all its sub-flows): bytes delivered so far, and its successor hops.
struct XcHop
{
    double bytes = 0.0;
    double lag = 0.0;
    double delivered = 0.0;
    std::vector<XcSender*> senders;
    std::vector<double> fracs;
    std::vector<XcHop*> next;
};

struct XcJob
{
    double compute = 0.0;
    double overlap = 0.0;
    double start = 0.0;
    std::vector<std::vector<std::vector<XcTransfer>>> phases; // [phase][flow][transfer]
    uint32_t phase = 0;
    uint32_t pending = 0;
    double iterStart = 0.0;
    double commStart = 0.0;
    double commEnd = 0.0;
    bool computeDone = false;
    bool commDone = false;
    uint32_t iterations = 0;
    double commSum = 0.0;
    double stepSum = 0.0;
};

struct XcRx
{
    Orchestrator* orch;
    uint32_t job;
    uint64_t need;
    uint64_t got;
    bool done;
    XcHop* hop;
    double start; // simulated s at launch
    double end;   // simulated s at the last byte (-1 while in flight)
    uint32_t conn; // connection id (the fluid's)
    void OnRx(ns3::Ptr<const ns3::Packet> p, const ns3::Address& from);
};

class Orchestrator
{
  public:
    double interval = 1.0;
    uint32_t steps = 1;
    uint32_t sendSize = 14480;
    double ringChunk = 0.0; // bytes; 0: ring hops are independent bulk transfers
    double wallLimit = 600.0;
    bool timedOut = false;
    uint64_t transfers = 0;
    std::vector<XcJob> jobs;
    std::vector<std::vector<std::vector<XcSub>>> routes; // [conn][step] -> sub-flows
    std::vector<std::unique_ptr<XcRx>> rx;
    std::vector<std::unique_ptr<XcSender>> senders;
    std::vector<std::unique_ptr<XcHop>> hops;
    uint16_t nextPort = 10000;
    std::chrono::steady_clock::time_point wallStart;

    void Configure(double intervalS, uint32_t nSteps, uint32_t nConns, uint32_t send, double wallLimitS,
                   double ringChunkBytes)
    {
        ringChunk = ringChunkBytes;
        interval = intervalS;
        steps = nSteps;
        sendSize = send;
        wallLimit = wallLimitS;
        routes.assign(nConns, std::vector<std::vector<XcSub>>(nSteps));
    }

    uint32_t AddJob(double compute, double overlap, double start)
    {
        XcJob j;
        j.compute = compute;
        j.overlap = overlap;
        j.start = start;
        jobs.push_back(j);
        return jobs.size() - 1;
    }

    void AddPhase(uint32_t job) { jobs[job].phases.emplace_back(); }

    // A phase is a list of flows; a flow of several transfers coupled hop to hop is a pipelined ring.
    void AddFlow(uint32_t job) { jobs[job].phases.back().emplace_back(); }

    void AddTransfer(uint32_t job, uint32_t conn, double bytes, int32_t pred, double lag)
    {
        jobs[job].phases.back().back().push_back(XcTransfer{conn, bytes, pred, lag});
    }

    void AddSub(uint32_t conn, uint32_t step, uint32_t srcNode, const std::string& src, uint32_t dstNode,
                const std::string& dst, double frac)
    {
        routes[conn][step].push_back(
            XcSub{srcNode, dstNode, ns3::Ipv4Address(src.c_str()), ns3::Ipv4Address(dst.c_str()), frac});
    }

    void Start()
    {
        wallStart = std::chrono::steady_clock::now();
        for (uint32_t j = 0; j < jobs.size(); ++j)
        {
            ns3::Simulator::Schedule(ns3::Seconds(jobs[j].start), &Orchestrator::BeginIteration, this, j);
        }
        ns3::Simulator::Schedule(ns3::MilliSeconds(1), &Orchestrator::Watchdog, this);
    }

    void Watchdog()
    {
        double w = std::chrono::duration<double>(std::chrono::steady_clock::now() - wallStart).count();
        if (w > wallLimit)
        {
            timedOut = true;
            ns3::Simulator::Stop();
            return;
        }
        ns3::Simulator::Schedule(ns3::MilliSeconds(1), &Orchestrator::Watchdog, this);
    }

    void BeginIteration(uint32_t j)
    {
        XcJob& job = jobs[j];
        job.iterStart = ns3::Simulator::Now().GetSeconds();
        job.computeDone = false;
        job.commDone = false;
        ns3::Simulator::Schedule(ns3::Seconds(job.compute), &Orchestrator::ComputeEnd, this, j);
        ns3::Simulator::Schedule(ns3::Seconds((1.0 - job.overlap) * job.compute), &Orchestrator::CommBegin,
                                 this, j);
    }

    void ComputeEnd(uint32_t j)
    {
        jobs[j].computeDone = true;
        MaybeEnd(j);
    }

    void CommBegin(uint32_t j)
    {
        jobs[j].commStart = ns3::Simulator::Now().GetSeconds();
        jobs[j].phase = 0;
        StartPhase(j);
    }

    void StartPhase(uint32_t j)
    {
        XcJob& job = jobs[j];
        while (job.phase < job.phases.size())
        {
            double now = ns3::Simulator::Now().GetSeconds();
            uint32_t step = std::min<uint32_t>(steps - 1, (uint32_t)std::floor(now / interval + 1e-12));
            job.pending = 0;
            for (const std::vector<XcTransfer>& flow : job.phases[job.phase])
            {
                bool ring = ringChunk > 0.0 && flow.size() > 1;
                std::vector<XcHop*> fh;
                for (const XcTransfer& t : flow)
                {
                    XcHop* h = nullptr;
                    if (ring)
                    {
                        hops.push_back(std::unique_ptr<XcHop>(new XcHop()));
                        h = hops.back().get();
                        h->bytes = t.bytes;
                        h->lag = t.pred >= 0 ? t.lag : t.bytes;
                    }
                    fh.push_back(h);
                    for (const XcSub& s : routes[t.conn][step])
                    {
                        uint64_t b = (uint64_t)std::llround(t.bytes * s.frac);
                        if (b == 0)
                        {
                            continue;
                        }
                        job.pending++;
                        Launch(j, t.conn, s, b, h);
                    }
                }
                if (ring)
                {
                    for (uint32_t i = 0; i < flow.size(); ++i)
                    {
                        if (flow[i].pred >= 0)
                        {
                            fh[flow[i].pred]->next.push_back(fh[i]);
                        }
                        Allow(fh[i], flow[i].pred >= 0 ? 0.0 : fh[i]->bytes);
                    }
                }
            }
            if (job.pending > 0)
            {
                return;
            }
            job.phase++;
        }
        job.commEnd = ns3::Simulator::Now().GetSeconds();
        job.commDone = true;
        MaybeEnd(j);
    }

    // A hop may have sent what its predecessor delivered, in whole chunks, plus one ring step.
    void Allow(XcHop* h, double predDelivered)
    {
        double chunk = std::min(ringChunk, h->lag); // a chunk is at most one ring step
        double chunks = std::floor(predDelivered / chunk + 1e-9);
        double allowed = std::min(h->bytes, chunks * chunk + h->lag);
        if (predDelivered >= h->bytes - 0.5)
        {
            allowed = h->bytes;
        }
        for (uint32_t i = 0; i < h->senders.size(); ++i)
        {
            XcSender* x = h->senders[i];
            uint64_t a = std::min<uint64_t>(x->total, (uint64_t)std::llround(allowed * h->fracs[i]));
            if (a > x->allowed)
            {
                x->allowed = a;
                x->Pump();
            }
        }
    }

    void Delivered(XcHop* h, uint64_t bytes)
    {
        h->delivered += (double)bytes;
        for (XcHop* n : h->next)
        {
            Allow(n, h->delivered * n->bytes / h->bytes);
        }
    }

    void Launch(uint32_t j, uint32_t conn, const XcSub& s, uint64_t bytes, XcHop* hop)
    {
        uint16_t port = nextPort++;
        if (nextPort > 64000)
        {
            nextPort = 10000;
        }
        transfers++;
        ns3::Ptr<ns3::Node> dn = ns3::NodeList::GetNode(s.dstNode);
        ns3::Ptr<ns3::Node> sn = ns3::NodeList::GetNode(s.srcNode);
        ns3::PacketSinkHelper sink("ns3::TcpSocketFactory", ns3::InetSocketAddress(s.dst, port));
        ns3::ApplicationContainer sa = sink.Install(dn);
        rx.push_back(std::unique_ptr<XcRx>(new XcRx{this, j, bytes, 0, false, hop, ns3::Simulator::Now().GetSeconds(), -1.0, conn}));
        sa.Get(0)->TraceConnectWithoutContext("Rx", ns3::MakeCallback(&XcRx::OnRx, rx.back().get()));
        sa.Start(ns3::Seconds(0.0));
        if (hop != nullptr)
        {
            ns3::Ptr<ns3::Socket> so = ns3::Socket::CreateSocket(sn, ns3::TcpSocketFactory::GetTypeId());
            senders.push_back(std::unique_ptr<XcSender>(
                new XcSender{hop, so, bytes, 0, 0, sendSize, false, false}));
            XcSender* x = senders.back().get();
            hop->senders.push_back(x);
            hop->fracs.push_back(s.frac);
            so->Bind(ns3::InetSocketAddress(s.src, 0));
            so->SetConnectCallback(ns3::MakeCallback(&XcSender::Connected, x),
                                   ns3::MakeCallback(&XcSender::Failed, x));
            so->SetSendCallback(ns3::MakeCallback(&XcSender::Space, x));
            so->Connect(ns3::InetSocketAddress(s.dst, port));
            return;
        }
        ns3::BulkSendHelper bulk("ns3::TcpSocketFactory", ns3::InetSocketAddress(s.dst, port));
        bulk.SetAttribute("MaxBytes", ns3::UintegerValue(bytes));
        bulk.SetAttribute("SendSize", ns3::UintegerValue(sendSize));
        bulk.SetAttribute("Local", ns3::AddressValue(ns3::InetSocketAddress(s.src, 0)));
        ns3::ApplicationContainer ba = bulk.Install(sn);
        ba.Start(ns3::Seconds(0.0));
    }

    void TransferDone(uint32_t j)
    {
        XcJob& job = jobs[j];
        if (--job.pending == 0)
        {
            job.phase++;
            StartPhase(j);
        }
    }

    void MaybeEnd(uint32_t j)
    {
        XcJob& job = jobs[j];
        if (!(job.computeDone && job.commDone))
        {
            return;
        }
        double now = ns3::Simulator::Now().GetSeconds();
        job.iterations++;
        job.commSum += job.commEnd - job.commStart;
        job.stepSum += now - job.iterStart;
        BeginIteration(j);
    }

    uint32_t Iterations(uint32_t j) const { return jobs[j].iterations; }

    uint64_t ReceivedBytes() const
    {
        uint64_t s = 0;
        for (const auto& r : rx)
        {
            s += r->got;
        }
        return s;
    }

    // Transfer i (launch order): job, bytes, launch and completion times (s; -1: not completed).
    uint32_t TransferCount() const { return rx.size(); }

    uint32_t TransferJob(uint32_t i) const { return rx[i]->job; }

    uint32_t TransferConn(uint32_t i) const { return rx[i]->conn; }

    double TransferBytes(uint32_t i) const { return (double)rx[i]->need; }

    double TransferStart(uint32_t i) const { return rx[i]->start; }

    double TransferEnd(uint32_t i) const { return rx[i]->end; }

    double CommSum(uint32_t j) const { return jobs[j].commSum; }

    double StepSum(uint32_t j) const { return jobs[j].stepSum; }
};

inline void
XcRx::OnRx(ns3::Ptr<const ns3::Packet> p, const ns3::Address& from)
{
    got += p->GetSize();
    if (hop != nullptr)
    {
        orch->Delivered(hop, p->GetSize());
    }
    if (!done && got >= need)
    {
        done = true;
        end = ns3::Simulator::Now().GetSeconds();
        orch->TransferDone(job);
    }
}

} // namespace ainet_xc
