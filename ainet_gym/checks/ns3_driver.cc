// The ns-3 side of `ainet-gym crosscheck` (compiled at run time by cppyy's JIT, see crosscheck/ns3.py).
//
// The Python side builds the fabric (nodes, point-to-point links, pinned host routes) and hands this
// orchestrator the jobs (compute time, overlap, start time, phases of transfers), the background sources
// (a payload rate per connection and the intervals in which each is on), the scheduled link rate changes
// and the routing of every connection in every decision interval. The orchestrator runs the same job
// timeline as the fluid engine (ainet_gym/sim/engine.py): an iteration computes for `compute`, its
// communication starts after (1 - overlap) * compute and runs the phases in order, each phase's transfers
// as TCP connections (one per routed sub-flow of the transfer's connection); the iteration ends when both
// compute and communication are done and the next one starts at once. Latency is not an added alpha term
// here: the packets pay the links' propagation and serialisation delays.
//
// Routing in decision interval k: the sub-flows of connection c are routes[c][k] (source node and
// address, destination node and address, fraction of the bytes, candidate path index, replica: with
// CrosscheckConfig.split_qps = K a connection is K TCP connections of 1/K of the bytes each, several on one
// path, told apart by their replica index). Pinned paths have
// their own address pair (the switches carry /32 routes for it); sprayed connections use the hosts'
// primary addresses (per-packet random ECMP of Ipv4GlobalRouting, path index -1).
//
// Route changes between intervals (what the fluid model's `routing.reroute: in_flight` means): at each
// interval boundary every transfer in flight whose connection's routing changed moves its not-yet-sent
// bytes to the new split: the bytes already handed to a sub-flow's socket stay on that sub-flow (they
// are on the wire or next in its queue: at most `backlog` bytes beyond the congestion window), the rest
// of the transfer is shared over the new sub-flows by their fractions. A sub-flow on a path the new split
// still uses carries on (same TCP connection); a path that joins gets a new TCP connection. Transfers
// that start after the boundary take the new split from their start. With `routing.reroute:
// new_transfers` (SetMoveInFlight(false)) nothing moves: a transfer keeps the sub-flows it started with.
//
// A flow of several transfers that form a cycle is a pipelined ring (NCCL's): each hop may send what the
// previous hop has delivered to its source, rounded down to whole chunks, plus one ring step (its own data
// of the first step). The hops are then coupled chunk by chunk and the ring moves at the pace of its
// slowest hop.
//
// Background sources are paced TCP senders: each routed sub-flow writes `sendSize` bytes every
// sendSize / rate seconds while its source is on (rate = the source's payload rate times the sub-flow's
// fraction), and skips a write when its socket already holds `backlog` unsent bytes: a demand cap, as
// the fluid model's, that TCP shares fairly with the other flows when the links are congested. The
// sub-flows' connections stay open for the whole run; a source that is off writes nothing.

#include <chrono>
#include <sstream>
#include <cmath>
#include <map>
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
    int32_t path;    // candidate path index of the connection; -1: sprayed per packet
    int32_t replica; // which of the connection's TCP connections on this path (CrosscheckConfig.split_qps)
};

struct XcTransferSpec
{
    uint32_t conn;
    double bytes;
    int32_t pred; // ring: index (in its flow) of the hop that feeds this one; -1: not coupled
    double lag;   // ring: bytes this hop may send ahead of what its predecessor delivered (one ring step)
};

struct XcTransfer;

// One TCP connection: a sub-flow of a transfer on one route, or of a background source.
struct XcFlow
{
    Orchestrator* orch = nullptr;
    XcTransfer* xfer = nullptr; // nullptr: a background sub-flow
    int32_t bg = -1;            // background source index, -1: a transfer's sub-flow
    uint32_t conn = 0;
    int32_t path = -1;
    int32_t replica = 0;
    ns3::Ipv4Address srcAddr, dstAddr; // its 5-tuple (TCP), for FqCoDel's flow hash (FlowBucket)
    uint16_t srcPort = 0, dstPort = 0;
    ns3::Ptr<ns3::Socket> sock;
    uint64_t total = 0;   // bytes it carries in all (transfers)
    uint64_t allowed = 0; // bytes it may have handed to its socket so far (a ring's credit)
    uint64_t written = 0; // bytes handed to its socket
    uint64_t base = 0;    // bytes written when its transfer's split last changed
    double frac = 0.0;    // its share of the transfer's bytes after the last change
    uint64_t got = 0;     // bytes received
    double launched = 0.0; // simulated s at its launch
    double lastRx = -1.0;  // simulated s of the last byte it received (-1: none yet)
    double firstRx = -1.0; // simulated s of the first byte it received (-1: none yet)
    bool connected = false;
    bool closed = false;
    double rate = 0.0; // background: payload bytes/s while on, 0: paused
    ns3::EventId tick;
    std::vector<double> rxStep; // bytes received per decision interval
    double dRto = 0, dLastChange = 0;
    uint32_t dRwnd = 0, dCwnd = 0, dState = 0, dNextTx = 0, dHighTx = 0, dRtoCount = 0;
    void OnRto(ns3::Time, ns3::Time n) { dRto = n.GetSeconds(); dRtoCount++; }
    void OnRwnd(uint32_t, uint32_t n) { dRwnd = n; }
    void OnCwnd(uint32_t, uint32_t n) { dCwnd = n; dLastChange = ns3::Simulator::Now().GetSeconds(); }
    void OnState(ns3::TcpSocket::TcpStates_t, ns3::TcpSocket::TcpStates_t n) { dState = (uint32_t)n; }
    void OnNextTx(ns3::SequenceNumber32, ns3::SequenceNumber32 n) { dNextTx = n.GetValue(); }
    void OnHighTx(ns3::SequenceNumber32, ns3::SequenceNumber32 n) { dHighTx = n.GetValue(); }

    uint32_t Unsent() const;
    void Pump();
    void Tick();
    void Connected(ns3::Ptr<ns3::Socket>);
    void Failed(ns3::Ptr<ns3::Socket>) {}
    void Space(ns3::Ptr<ns3::Socket>, uint32_t) { Pump(); }
    void OnRx(ns3::Ptr<const ns3::Packet> p, const ns3::Address& from);
};

// One connection's bytes in one phase (a ring hop or a bulk transfer), carried by its sub-flows.
struct XcTransfer
{
    uint32_t id = 0; // launch order (index in Orchestrator::transfers)
    uint32_t job = 0;
    uint32_t conn = 0;
    uint64_t bytes = 0;
    uint64_t received = 0;
    bool done = false;
    double start = 0.0; // simulated s at launch
    double end = -1.0;  // simulated s at the last byte (-1 while in flight)
    uint32_t routeStep = 0; // the interval whose routing it follows
    bool ring = false;
    double lag = 0.0;
    double allowedTotal = 0.0; // bytes it may have handed to its sockets so far (all of them unless a ring)
    uint64_t base0 = 0;        // bytes handed to its sockets when its split last changed
    std::vector<XcFlow*> flows;
    std::vector<XcTransfer*> next; // ring: the hops it feeds
    std::vector<XcTransfer*> prev; // ring: the hops that feed it
    double predDelivered = 0.0;    // ring: what its predecessor has delivered (scaled to its bytes)
    uint64_t written = 0;          // bytes handed to its sockets, all sub-flows
};

struct XcJob
{
    double compute = 0.0;
    double overlap = 0.0;
    double start = 0.0;
    std::vector<std::vector<std::vector<XcTransferSpec>>> phases; // [phase][flow][transfer]
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
    std::vector<uint32_t> iterStep; // per interval: iterations that ended in it
    std::vector<double> commStep;   // per interval: their communication times, summed (s)
    std::vector<double> stepStep;   // per interval: their step times, summed (s)
    std::vector<double> iterComm;   // per iteration completed, in order: its communication time (s)
    std::vector<double> iterEnd;    // per iteration completed, in order: the time it ended (s)
};

struct XcBackground
{
    uint32_t conn = 0;
    double rate = 0.0;           // payload bytes/s while on
    std::vector<uint8_t> on;     // per interval
    std::vector<XcFlow*> flows;  // its sub-flows so far (one per route)
};

struct XcRateChange
{
    uint32_t step;
    uint32_t device;
    double bps;
};

class Orchestrator
{
  public:
    double interval = 1.0;
    uint32_t steps = 1;
    uint32_t sendSize = 14480;
    uint32_t backlog = 65536;
    double ringChunk = 0.0; // bytes; 0: ring hops are independent bulk transfers
    double ringBufferSteps = 0.0; // chunks a ring hop may send beyond what its successor sent; 0: no bound
    double wallLimit = 600.0;
    bool timedOut = false;
    uint32_t resplits = 0; // transfers whose not-yet-sent bytes moved at a boundary
    bool moveInFlight = true; // false (routing.reroute: new_transfers): a transfer keeps its first split
    bool debug = false;
    std::vector<XcJob> jobs;
    std::vector<std::vector<std::vector<XcSub>>> routes; // [conn][step] -> sub-flows
    std::vector<std::unique_ptr<XcTransfer>> transfers;
    std::vector<std::unique_ptr<XcFlow>> flows;
    std::vector<XcBackground> backgrounds;
    std::vector<ns3::Ptr<ns3::NetDevice>> devices;
    std::vector<XcRateChange> rateChanges;
    uint16_t nextPort = 10000;
    std::chrono::steady_clock::time_point wallStart;

    void Configure(double intervalS, uint32_t nSteps, uint32_t nConns, uint32_t send, double wallLimitS,
                   double ringChunkBytes, uint32_t backlogBytes, double ringBuffer)
    {
        ringChunk = ringChunkBytes;
        ringBufferSteps = ringBuffer;
        interval = intervalS;
        steps = nSteps;
        sendSize = send;
        wallLimit = wallLimitS;
        backlog = backlogBytes;
        routes.assign(nConns, std::vector<std::vector<XcSub>>(nSteps));
    }

    void SetMoveInFlight(bool move) { moveInFlight = move; }

    uint32_t AddJob(double compute, double overlap, double start)
    {
        XcJob j;
        j.compute = compute;
        j.overlap = overlap;
        j.start = start;
        j.iterStep.assign(steps, 0);
        j.commStep.assign(steps, 0.0);
        j.stepStep.assign(steps, 0.0);
        jobs.push_back(j);
        return jobs.size() - 1;
    }

    void AddPhase(uint32_t job) { jobs[job].phases.emplace_back(); }

    // A phase is a list of flows; a flow of several transfers coupled hop to hop is a pipelined ring.
    void AddFlow(uint32_t job) { jobs[job].phases.back().emplace_back(); }

    void AddTransfer(uint32_t job, uint32_t conn, double bytes, int32_t pred, double lag)
    {
        jobs[job].phases.back().back().push_back(XcTransferSpec{conn, bytes, pred, lag});
    }

    void AddSub(uint32_t conn, uint32_t step, uint32_t srcNode, const std::string& src, uint32_t dstNode,
                const std::string& dst, double frac, int32_t path, int32_t replica)
    {
        routes[conn][step].push_back(XcSub{srcNode, dstNode, ns3::Ipv4Address(src.c_str()),
                                           ns3::Ipv4Address(dst.c_str()), frac, path, replica});
    }

    uint32_t AddBackground(uint32_t conn, double rateBytesPerS)
    {
        XcBackground b;
        b.conn = conn;
        b.rate = rateBytesPerS;
        b.on.assign(steps, 0);
        backgrounds.push_back(b);
        return backgrounds.size() - 1;
    }

    void SetBackgroundOn(uint32_t bg, uint32_t step, bool on) { backgrounds[bg].on[step] = on ? 1 : 0; }

    uint32_t AddDevice(ns3::Ptr<ns3::NetDevice> dev)
    {
        devices.push_back(dev);
        return devices.size() - 1;
    }

    // From the start of interval `step` on, `device` sends at `bps` (a scheduled degradation or repair).
    void AddRateChange(uint32_t step, uint32_t device, double bps)
    {
        rateChanges.push_back(XcRateChange{step, device, bps});
    }

    uint32_t StepOf(double t) const
    {
        return std::min<uint32_t>(steps - 1, (uint32_t)std::floor(t / interval + 1e-12));
    }

    void Start()
    {
        wallStart = std::chrono::steady_clock::now();
        Boundary(0);
        for (uint32_t k = 1; k < steps; ++k)
        {
            ns3::Simulator::Schedule(ns3::Seconds(k * interval), &Orchestrator::Boundary, this, k);
        }
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

    // The start of decision interval k: link rates, background sources, and the new split of every
    // transfer in flight.
    void Boundary(uint32_t k)
    {
        for (const XcRateChange& r : rateChanges)
        {
            if (r.step == k)
            {
                ns3::Ptr<ns3::PointToPointNetDevice> d =
                    ns3::DynamicCast<ns3::PointToPointNetDevice>(devices[r.device]);
                d->SetDataRate(ns3::DataRate((uint64_t)std::llround(r.bps)));
            }
        }
        for (uint32_t b = 0; b < backgrounds.size(); ++b)
        {
            SetBackground(b, k);
        }
        if (k == 0 || !moveInFlight)
        {
            return;
        }
        for (const auto& x : transfers)
        {
            if (!x->done && x->routeStep != k)
            {
                if (!SameRoutes(routes[x->conn][x->routeStep], routes[x->conn][k]))
                {
                    Resplit(x.get(), k);
                }
                x->routeStep = k;
            }
        }
    }

    static bool SameRoutes(const std::vector<XcSub>& a, const std::vector<XcSub>& b)
    {
        if (a.size() != b.size())
        {
            return false;
        }
        for (uint32_t i = 0; i < a.size(); ++i)
        {
            if (a[i].path != b[i].path || a[i].replica != b[i].replica || std::fabs(a[i].frac - b[i].frac) > 1e-9)
            {
                return false;
            }
        }
        return true;
    }

    void SetBackground(uint32_t b, uint32_t k)
    {
        XcBackground& bg = backgrounds[b];
        for (XcFlow* f : bg.flows)
        {
            f->rate = 0.0;
        }
        if (bg.on[k])
        {
            for (const XcSub& s : routes[bg.conn][k])
            {
                XcFlow* f = nullptr;
                for (XcFlow* g : bg.flows)
                {
                    if (g->path == s.path && g->replica == s.replica)
                    {
                        f = g;
                    }
                }
                if (f == nullptr)
                {
                    f = Launch(nullptr, (int32_t)b, bg.conn, s);
                    bg.flows.push_back(f);
                }
                f->rate = bg.rate * s.frac;
            }
        }
        for (XcFlow* f : bg.flows)
        {
            ns3::Simulator::Cancel(f->tick);
            if (f->rate > 0.0)
            {
                f->Tick();
            }
        }
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
            uint32_t step = StepOf(now);
            job.pending = 0;
            for (const std::vector<XcTransferSpec>& flow : job.phases[job.phase])
            {
                bool ring = ringChunk > 0.0 && flow.size() > 1;
                std::vector<XcTransfer*> fx;
                for (const XcTransferSpec& t : flow)
                {
                    transfers.push_back(std::unique_ptr<XcTransfer>(new XcTransfer()));
                    XcTransfer* x = transfers.back().get();
                    x->id = transfers.size() - 1;
                    x->job = j;
                    x->conn = t.conn;
                    x->bytes = (uint64_t)std::llround(t.bytes);
                    x->start = now;
                    x->routeStep = step;
                    x->ring = ring;
                    x->lag = t.pred >= 0 ? t.lag : t.bytes;
                    x->allowedTotal = ring ? 0.0 : (double)x->bytes;
                    fx.push_back(x);
                    for (const XcSub& s : routes[t.conn][step])
                    {
                        XcFlow* f = Launch(x, -1, t.conn, s);
                        f->frac = s.frac;
                        x->flows.push_back(f);
                    }
                    SetTotals(x);
                    job.pending++;
                }
                for (uint32_t i = 0; i < flow.size(); ++i)
                {
                    if (ring)
                    {
                        if (flow[i].pred >= 0)
                        {
                            fx[flow[i].pred]->next.push_back(fx[i]);
                            fx[i]->prev.push_back(fx[flow[i].pred]);
                        }
                        Allow(fx[i], flow[i].pred >= 0 ? 0.0 : (double)fx[i]->bytes);
                    }
                    else
                    {
                        Distribute(fx[i]);
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

    // Each sub-flow's total: what it has carried until the last split change plus its share of the rest
    // (largest remainders, so that the totals add up to the transfer's bytes).
    static void SetTotals(XcTransfer* x)
    {
        uint64_t rest = x->bytes - std::min(x->bytes, x->base0);
        uint64_t given = 0;
        int32_t last = -1;
        for (uint32_t i = 0; i < x->flows.size(); ++i)
        {
            XcFlow* f = x->flows[i];
            uint64_t share = (uint64_t)std::floor((double)rest * f->frac);
            f->total = f->base + share;
            given += share;
            if (f->frac > 0.0 && !f->closed)
            {
                last = (int32_t)i;
            }
        }
        if (last >= 0 && given < rest)
        {
            x->flows[last]->total += rest - given;
        }
    }

    // Hand each sub-flow its share of what the transfer may have sent so far, rounded up to whole bytes:
    // rounded down, the shares of a step split over K sub-flows could add up to K - 1 bytes less than the
    // step, and a ring whose hops wait for exactly one step (a step shorter than a chunk: 32-rank rings of
    // xc-periodic-interference-64) stalled after its first step.
    void Distribute(XcTransfer* x)
    {
        bool all = x->allowedTotal >= (double)x->bytes - 0.5;
        double more = std::max(0.0, x->allowedTotal - (double)x->base0);
        for (XcFlow* f : x->flows)
        {
            uint64_t a = all ? f->total
                             : std::min<uint64_t>(f->total, f->base + (uint64_t)std::ceil(more * f->frac - 1e-6));
            if (a > f->allowed)
            {
                f->allowed = a;
            }
            f->Pump();
        }
    }

    // A ring hop may have sent what its predecessor delivered, in whole chunks, plus one ring step; with
    // ringBufferSteps, also at most that many chunks beyond what each hop it feeds has sent (the
    // receiver's buffer: NCCL's FIFO of NCCL_STEPS slots, freed as the receiver forwards).
    void Allow(XcTransfer* x, double predDelivered)
    {
        x->predDelivered = std::max(x->predDelivered, predDelivered);
        double chunk = std::min(ringChunk, x->lag); // a chunk is at most one ring step
        double chunks = std::floor(x->predDelivered / chunk + 1e-9);
        double allowed = std::min((double)x->bytes, chunks * chunk + x->lag);
        if (x->predDelivered >= (double)x->bytes - 0.5)
        {
            allowed = (double)x->bytes;
        }
        if (ringBufferSteps > 0.0)
        {
            for (XcTransfer* n : x->next)
            {
                double room = (double)n->written * (double)x->bytes / (double)n->bytes + ringBufferSteps * chunk;
                allowed = std::min(allowed, room);
            }
        }
        if (allowed > x->allowedTotal)
        {
            x->allowedTotal = allowed;
            Distribute(x);
        }
    }

    // Interval k's split for a transfer in flight: the bytes not yet handed to a socket follow it.
    void Resplit(XcTransfer* x, uint32_t k)
    {
        resplits++;
        uint64_t w = 0;
        for (XcFlow* f : x->flows)
        {
            w += f->written;
            f->base = f->written;
            f->frac = 0.0;
        }
        x->base0 = w;
        for (const XcSub& s : routes[x->conn][k])
        {
            XcFlow* f = nullptr;
            for (XcFlow* g : x->flows)
            {
                if (g->path == s.path && g->replica == s.replica && !g->closed)
                {
                    f = g;
                }
            }
            if (f == nullptr)
            {
                f = Launch(x, -1, x->conn, s);
                x->flows.push_back(f);
            }
            f->frac = s.frac;
        }
        SetTotals(x);
        for (XcFlow* f : x->flows)
        {
            f->allowed = std::min(f->allowed, f->total);
        }
        Distribute(x);
    }

    void Delivered(XcTransfer* x)
    {
        for (XcTransfer* n : x->next)
        {
            Allow(n, (double)x->received * (double)n->bytes / (double)x->bytes);
        }
    }

    XcFlow* Launch(XcTransfer* x, int32_t bg, uint32_t conn, const XcSub& s)
    {
        uint16_t port = nextPort++;
        if (nextPort > 64000)
        {
            nextPort = 10000;
        }
        flows.push_back(std::unique_ptr<XcFlow>(new XcFlow()));
        XcFlow* f = flows.back().get();
        f->orch = this;
        f->xfer = x;
        f->bg = bg;
        f->conn = conn;
        f->path = s.path;
        f->replica = s.replica;
        f->srcAddr = s.src;
        f->dstAddr = s.dst;
        f->dstPort = port;
        f->launched = ns3::Simulator::Now().GetSeconds();
        f->rxStep.assign(steps, 0.0);
        ns3::Ptr<ns3::Node> dn = ns3::NodeList::GetNode(s.dstNode);
        ns3::Ptr<ns3::Node> sn = ns3::NodeList::GetNode(s.srcNode);
        ns3::PacketSinkHelper sink("ns3::TcpSocketFactory", ns3::InetSocketAddress(s.dst, port));
        ns3::ApplicationContainer sa = sink.Install(dn);
        sa.Get(0)->TraceConnectWithoutContext("Rx", ns3::MakeCallback(&XcFlow::OnRx, f));
        sa.Start(ns3::Seconds(0.0));
        f->sock = ns3::Socket::CreateSocket(sn, ns3::TcpSocketFactory::GetTypeId());
        f->sock->Bind(ns3::InetSocketAddress(s.src, 0));
        f->sock->SetConnectCallback(ns3::MakeCallback(&XcFlow::Connected, f),
                                    ns3::MakeCallback(&XcFlow::Failed, f));
        f->sock->SetSendCallback(ns3::MakeCallback(&XcFlow::Space, f));
        if (debug)
        {
            f->sock->TraceConnectWithoutContext("RTO", ns3::MakeCallback(&XcFlow::OnRto, f));
            f->sock->TraceConnectWithoutContext("RWND", ns3::MakeCallback(&XcFlow::OnRwnd, f));
            f->sock->TraceConnectWithoutContext("CongestionWindow", ns3::MakeCallback(&XcFlow::OnCwnd, f));
            f->sock->TraceConnectWithoutContext("State", ns3::MakeCallback(&XcFlow::OnState, f));
            f->sock->TraceConnectWithoutContext("NextTxSequence", ns3::MakeCallback(&XcFlow::OnNextTx, f));
            f->sock->TraceConnectWithoutContext("HighestSequence", ns3::MakeCallback(&XcFlow::OnHighTx, f));
        }
        f->sock->Connect(ns3::InetSocketAddress(s.dst, port));
        return f;
    }

    void Received(XcFlow* f, uint32_t bytes)
    {
        f->rxStep[StepOf(ns3::Simulator::Now().GetSeconds())] += bytes;
        XcTransfer* x = f->xfer;
        if (x == nullptr)
        {
            return;
        }
        x->received += bytes;
        if (x->ring)
        {
            Delivered(x);
        }
        if (!x->done && x->received >= x->bytes)
        {
            x->done = true;
            x->end = ns3::Simulator::Now().GetSeconds();
            TransferDone(x->job);
        }
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
        uint32_t k = StepOf(now);
        job.iterations++;
        job.commSum += job.commEnd - job.commStart;
        job.stepSum += now - job.iterStart;
        job.iterStep[k]++;
        job.commStep[k] += job.commEnd - job.commStart;
        job.stepStep[k] += now - job.iterStart;
        job.iterComm.push_back(job.commEnd - job.commStart);
        job.iterEnd.push_back(now);
        BeginIteration(j);
    }

    uint32_t Iterations(uint32_t j) const { return jobs[j].iterations; }

    double CommSum(uint32_t j) const { return jobs[j].commSum; }

    double StepSum(uint32_t j) const { return jobs[j].stepSum; }

    uint32_t IterationsIn(uint32_t j, uint32_t k) const { return jobs[j].iterStep[k]; }

    double CommSumIn(uint32_t j, uint32_t k) const { return jobs[j].commStep[k]; }

    double StepSumIn(uint32_t j, uint32_t k) const { return jobs[j].stepStep[k]; }

    // the per-iteration log (i < Iterations(j)): communication time and end time (s) of iteration i
    double IterComm(uint32_t j, uint32_t i) const { return jobs[j].iterComm[i]; }

    double IterEnd(uint32_t j, uint32_t i) const { return jobs[j].iterEnd[i]; }

    // Diagnosis aids, not called by the replay: with `debug` set before Start(), sub-flows trace their
    // TCP state; WatchDrops() counts IP-layer drops by reason; DebugOpen() dumps every transfer that has
    // not completed and its sub-flows' sockets (docs/fidelity-learning.md, the xc-ingest-bursts stall).
    std::vector<uint64_t> ipDrops = std::vector<uint64_t>(8, 0);
    std::vector<double> ipDropLast = std::vector<double>(8, 0.0);
    std::ostringstream dropLog;
    uint32_t dropLogged = 0;

    void OnIpDrop(const ns3::Ipv4Header& h, ns3::Ptr<const ns3::Packet> p, ns3::Ipv4L3Protocol::DropReason r,
                  ns3::Ptr<ns3::Ipv4> ipv4, uint32_t iface)
    {
        ipDrops[(uint32_t)r % 8]++;
        ipDropLast[(uint32_t)r % 8] = ns3::Simulator::Now().GetSeconds();
        if (dropLogged < 40)
        {
            dropLogged++;
            dropLog << "drop t " << ns3::Simulator::Now().GetSeconds() << " reason " << (uint32_t)r << " node "
                    << ipv4->GetObject<ns3::Node>()->GetId() << " " << h.GetSource() << " -> " << h.GetDestination()
                    << " size " << p->GetSize() << "\n";
        }
    }

    void WatchDrops()
    {
        ns3::Config::ConnectWithoutContext("/NodeList/*/$ns3::Ipv4L3Protocol/Drop",
                                           ns3::MakeCallback(&Orchestrator::OnIpDrop, this));
    }

    std::string DebugOpen() const
    {
        std::ostringstream o;
        for (uint32_t i = 0; i < 8; ++i)
        {
            o << "ipdrop reason " << i << " n " << ipDrops[i] << " last " << ipDropLast[i] << "\n";
        }
        o << dropLog.str();
        for (const auto& x : transfers)
        {
            if (x->done)
                continue;
            o << "xfer job " << x->job << " conn " << x->conn << " bytes " << x->bytes << " recv " << x->received
              << " allowedTotal " << x->allowedTotal << " predDel " << x->predDelivered << " written " << x->written
              << " base0 " << x->base0 << " ring " << x->ring << " next:";
            for (XcTransfer* n : x->next)
                o << " (conn " << n->conn << " written " << n->written << " done " << n->done << ")";
            o << "\n";
            for (XcFlow* f : x->flows)
            {
                o << "   flow path " << f->path << " total " << f->total << " allowed " << f->allowed << " written "
                  << f->written << " got " << f->got << " conn " << f->connected << " closed " << f->closed;
                if (f->connected && !f->closed)
                {
                    o << " unsent " << f->Unsent() << " txavail " << f->sock->GetTxAvailable() << " rto " << f->dRto
                      << " rtos " << f->dRtoCount << " rwnd " << f->dRwnd << " cwnd " << f->dCwnd << " lastcwnd "
                      << f->dLastChange << " state " << f->dState << " nexttx " << f->dNextTx << " hightx "
                      << f->dHighTx << " txbuf " << ns3::DynamicCast<ns3::TcpSocketBase>(f->sock)->GetTxBuffer()->Size()
                      << " bif " << ns3::DynamicCast<ns3::TcpSocketBase>(f->sock)->GetTxBuffer()->BytesInFlight()
                      << " head " << ns3::DynamicCast<ns3::TcpSocketBase>(f->sock)->GetTxBuffer()->HeadSequence().GetValue();
                }
                o << "\n";
            }
        }
        return o.str();
    }

    // Transfer i (launch order): job, bytes, launch and completion times (s; -1: not completed).
    uint32_t TransferCount() const { return transfers.size(); }

    uint32_t TransferJob(uint32_t i) const { return transfers[i]->job; }

    uint32_t TransferConn(uint32_t i) const { return transfers[i]->conn; }

    double TransferBytes(uint32_t i) const { return (double)transfers[i]->bytes; }

    double TransferStart(uint32_t i) const { return transfers[i]->start; }

    double TransferEnd(uint32_t i) const { return transfers[i]->end; }

    // Sub-flow i (TCP connection, launch order): its connection, path index, bytes received per interval.
    uint32_t FlowCount() const { return flows.size(); }

    uint32_t FlowConn(uint32_t i) const { return flows[i]->conn; }

    int32_t FlowPath(uint32_t i) const { return flows[i]->path; }

    double FlowRxIn(uint32_t i, uint32_t k) const { return flows[i]->rxStep[k]; }

    // Sub-flow i: its transfer (launch order; -1: a background sub-flow), bytes it was to carry and has
    // received, launch time and the times of its last and first received byte (s; -1: none), for
    // per-sub-flow completion and start times (docs/fidelity-learning.md).
    int32_t FlowTransfer(uint32_t i) const { return flows[i]->xfer ? (int32_t)flows[i]->xfer->id : -1; }

    double FlowTotal(uint32_t i) const { return (double)flows[i]->total; }

    double FlowGot(uint32_t i) const { return (double)flows[i]->got; }

    double FlowLaunch(uint32_t i) const { return flows[i]->launched; }

    double FlowLastRx(uint32_t i) const { return flows[i]->lastRx; }

    double FlowFirstRx(uint32_t i) const { return flows[i]->firstRx; }

    // The FqCoDel bucket of sub-flow i's data packets (ack = false) or of its ACKs (ack = true) in a queue
    // disc of `buckets` flows and hash salt `perturbation`: ns-3's Ipv4QueueDiscItem::Hash (murmur3 over
    // source and destination address, protocol, ports and the salt) modulo the buckets, as
    // FqCoDelQueueDisc classifies a packet (CrosscheckConfig.fq_flows). -1: the sub-flow never connected.
    int64_t FlowBucket(uint32_t i, bool ack, uint32_t buckets, uint32_t perturbation) const
    {
        const XcFlow* f = flows[i].get();
        if (f->srcPort == 0)
        {
            return -1;
        }
        ns3::Ipv4Address a = ack ? f->dstAddr : f->srcAddr;
        ns3::Ipv4Address b = ack ? f->srcAddr : f->dstAddr;
        uint16_t pa = ack ? f->dstPort : f->srcPort;
        uint16_t pb = ack ? f->srcPort : f->dstPort;
        uint8_t buf[17];
        a.Serialize(buf);
        b.Serialize(buf + 4);
        buf[8] = 6; // TCP
        buf[9] = (pa >> 8) & 0xff;
        buf[10] = pa & 0xff;
        buf[11] = (pb >> 8) & 0xff;
        buf[12] = pb & 0xff;
        buf[13] = (perturbation >> 24) & 0xff;
        buf[14] = (perturbation >> 16) & 0xff;
        buf[15] = (perturbation >> 8) & 0xff;
        buf[16] = perturbation & 0xff;
        return (int64_t)(ns3::Hash32((char*)buf, 17) % buckets);
    }
};

inline uint32_t
XcFlow::Unsent() const
{
    ns3::Ptr<ns3::TcpSocketBase> t = ns3::DynamicCast<ns3::TcpSocketBase>(sock);
    ns3::Ptr<ns3::TcpTxBuffer> b = t->GetTxBuffer();
    uint32_t size = b->Size();
    uint32_t sent = b->BytesInFlight();
    return size > sent ? size - sent : 0;
}

inline void
XcFlow::Pump()
{
    if (!connected || closed || xfer == nullptr)
    {
        return;
    }
    while (written < allowed)
    {
        if (Unsent() >= orch->backlog)
        {
            return;
        }
        uint32_t avail = sock->GetTxAvailable();
        if (avail == 0)
        {
            return;
        }
        uint64_t n = std::min<uint64_t>(std::min<uint64_t>(orch->sendSize, allowed - written), avail);
        int r = sock->Send(ns3::Create<ns3::Packet>((uint32_t)n));
        if (r <= 0)
        {
            return;
        }
        written += (uint64_t)r;
        xfer->written += (uint64_t)r;
        if (orch->ringBufferSteps > 0.0)
        {
            for (XcTransfer* p : xfer->prev) // what this hop sent frees room in its feeders' buffer
            {
                orch->Allow(p, p->predDelivered);
            }
        }
    }
    if (written >= total)
    {
        closed = true;
        sock->Close();
    }
}

inline void
XcFlow::Tick()
{
    if (rate <= 0.0)
    {
        return;
    }
    if (connected && Unsent() < orch->backlog)
    {
        uint32_t n = std::min<uint32_t>(orch->sendSize, sock->GetTxAvailable());
        if (n > 0)
        {
            int r = sock->Send(ns3::Create<ns3::Packet>(n));
            if (r > 0)
            {
                written += (uint64_t)r;
            }
        }
    }
    tick = ns3::Simulator::Schedule(ns3::Seconds((double)orch->sendSize / rate), &XcFlow::Tick, this);
}

inline void
XcFlow::Connected(ns3::Ptr<ns3::Socket>)
{
    connected = true;
    ns3::Address name;
    sock->GetSockName(name);
    srcPort = ns3::InetSocketAddress::ConvertFrom(name).GetPort();
    Pump();
    // A background sub-flow is launched when its source first turns on, and its first tick finds the
    // handshake still open: write now rather than one pacing period (sendSize / rate) later, so that the
    // source starts at its interval's boundary (plus the handshake), as the fluid model's does.
    if (xfer == nullptr && rate > 0.0)
    {
        ns3::Simulator::Cancel(tick);
        Tick();
    }
}

inline void
XcFlow::OnRx(ns3::Ptr<const ns3::Packet> p, const ns3::Address& from)
{
    got += p->GetSize();
    lastRx = ns3::Simulator::Now().GetSeconds();
    if (firstRx < 0.0)
    {
        firstRx = lastRx;
    }
    orch->Received(this, p->GetSize());
}

// Transmit counter of one point-to-point device (CrosscheckConfig.device_counter_bin_s): the wire bytes
// (PPP framing included) of every packet the device finished sending, per time bin of `bin` seconds.
// Packets above 200 bytes (data segments) are counted by their IPv4 (source, destination) address pair,
// read from the header bytes after the 2-byte PPP header; the rest (ACKs, handshakes) in one total.
struct DeviceCounter
{
    double bin;
    uint32_t nBins;
    std::map<uint64_t, std::vector<double>> data; // (source << 32 | destination) -> bytes per bin
    std::vector<double> other;                    // bytes per bin of packets of at most 200 bytes

    DeviceCounter(double binS, uint32_t n)
        : bin(binS),
          nBins(n),
          other(n, 0.0)
    {
    }

    void Tx(ns3::Ptr<const ns3::Packet> p)
    {
        uint32_t k = (uint32_t)(ns3::Simulator::Now().GetSeconds() / bin);
        if (k >= nBins)
        {
            return;
        }
        uint32_t s = p->GetSize();
        uint8_t h[22];
        if (s <= 200 || p->CopyData(h, 22) < 22)
        {
            other[k] += s;
            return;
        }
        uint64_t src = ((uint64_t)h[14] << 24) | ((uint64_t)h[15] << 16) | ((uint64_t)h[16] << 8) | h[17];
        uint64_t dst = ((uint64_t)h[18] << 24) | ((uint64_t)h[19] << 16) | ((uint64_t)h[20] << 8) | h[21];
        std::vector<double>& v = data[(src << 32) | dst];
        if (v.empty())
        {
            v.assign(nBins, 0.0);
        }
        v[k] += s;
    }

    void Attach(ns3::Ptr<ns3::NetDevice> d)
    {
        d->TraceConnectWithoutContext("PhyTxEnd", ns3::MakeCallback(&DeviceCounter::Tx, this));
    }

    // The address pairs seen, in key order, and their bytes in bin k.
    std::vector<uint64_t> Keys() const
    {
        std::vector<uint64_t> out;
        for (const auto& kv : data)
        {
            out.push_back(kv.first);
        }
        return out;
    }

    // The bytes per bin of address pair `key`.
    std::vector<double> Series(uint64_t key) const { return data.at(key); }
};

} // namespace ainet_xc
