//! The HTTP server: the application (the route table under each prefix,
//! the explorer, Swagger UI) and running it until it is told to stop.

use std::net::TcpListener;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use actix_web::dev::Server;
use actix_web::middleware::{from_fn, Compress};
use actix_web::{web, App, HttpServer};
use utoipa_swagger_ui::SwaggerUi;

use crate::access_log::AccessLog;
use crate::error::ApiError;
use crate::explore;
use crate::middleware::{guard_api, request_context};
use crate::openapi;
use crate::routes::table::{mount, not_found};
use crate::routes::{ApiPrefix, Mount, ENDPOINTS, PREFIXES};
use crate::state::AppState;

fn path_error(err: actix_web::error::PathError, _req: &actix_web::HttpRequest) -> actix_web::Error {
    ApiError::path(&err).into()
}

/// Configures the whole application (shared by `serve` and the tests).
pub fn configure(state: Arc<AppState>) -> impl FnOnce(&mut web::ServiceConfig) + Clone {
    // Built once, not per worker.
    let doc = openapi::document();
    move |cfg: &mut web::ServiceConfig| {
        cfg.app_data(web::Data::from(state))
            .app_data(web::PathConfig::default().error_handler(path_error))
            .configure(mount(&ENDPOINTS, Mount::Root));
        // The API before Swagger UI, whose `{_:.*}` pattern is a regex every
        // request would otherwise try first.
        for prefix in PREFIXES {
            cfg.service(
                web::scope(prefix)
                    .app_data(ApiPrefix(prefix))
                    .wrap(from_fn(guard_api))
                    .configure(mount(&ENDPOINTS, Mount::Api))
                    .default_service(web::to(not_found)),
            );
        }
        cfg.configure(explore::configure);
        cfg.service(SwaggerUi::new("/swagger-ui/{_:.*}").url("/api-docs/openapi.json", doc));
    }
}

/// How the server runs and stops.
#[derive(Clone)]
pub struct ServeOptions {
    /// HTTP worker threads.
    pub workers: usize,
    /// Where each request's access-log line goes (none: no access log).
    pub access_log: Option<Arc<AccessLog>>,
    /// Stop gracefully on SIGTERM or SIGINT, as the binary does. Without
    /// it (tests), the server stops when its handle says so or is dropped.
    pub stop_on_signals: bool,
    /// How long a graceful stop waits for open connections to finish their
    /// requests before it closes them.
    pub shutdown_timeout: Duration,
}

impl Default for ServeOptions {
    fn default() -> Self {
        ServeOptions {
            workers: 1,
            access_log: None,
            stop_on_signals: false,
            shutdown_timeout: Duration::from_secs(10),
        }
    }
}

/// Starts the HTTP server on an already bound listener. With
/// `stop_on_signals`, it must be called inside the actix runtime that will
/// run it (the stop is a task of that runtime).
pub fn serve(
    listener: TcpListener,
    state: Arc<AppState>,
    options: ServeOptions,
) -> std::io::Result<Server> {
    let configure = configure(state.clone());
    let log = options.access_log;
    let open = Arc::new(AtomicUsize::new(0));
    let counter = open.clone();
    let server = HttpServer::new(move || {
        let mut app = App::new();
        if let Some(log) = &log {
            app = app.app_data(web::Data::from(log.clone()));
        }
        app.configure(configure.clone())
            .default_service(web::to(not_found))
            // gzip only when the client asks (Accept-Encoding). Inside
            // `request_context`, which boxes the body: a complete body stays a
            // complete body there, so uncompressed responses keep the fast path.
            .wrap(Compress::default())
            // Also writes the access log: one layer, not two, since each
            // `from_fn` layer boxes a future per request.
            .wrap(from_fn(request_context))
    })
    // Counts open connections: the guard lives in the connection's data.
    .on_connect(move |_, data| {
        data.insert(OpenConnection::new(&counter));
    })
    .workers(options.workers)
    // Streamed bodies (the event stream) are written out every 2 KB, so a
    // connection's write buffer keeps its initial size and touches one page
    // of it (`state::stream::PIECE`).
    .h1_write_buffer_size(crate::state::stream::WRITE_BUFFER)
    // A compressed answer is written in two parts (actix-web compresses a
    // body of more than 1 KB off the worker, so the head goes first); with
    // Nagle's algorithm the second waited for the client's delayed ACK,
    // about 40 ms an answer on a kept-alive connection.
    .tcp_nodelay(true)
    // Our stop drains first (`stop_on_signal`); actix's own signal handling
    // would close busy kept-alive connections at once.
    .disable_signals()
    .listen(listener)?
    .run();
    if options.stop_on_signals {
        actix_web::rt::spawn(stop_on_signal(
            server.handle(),
            state,
            open,
            options.shutdown_timeout,
        ));
    }
    Ok(server)
}

/// Decrements the open-connection count when its connection closes.
struct OpenConnection(Arc<AtomicUsize>);

impl OpenConnection {
    fn new(counter: &Arc<AtomicUsize>) -> OpenConnection {
        counter.fetch_add(1, Ordering::Relaxed);
        OpenConnection(counter.clone())
    }
}

impl Drop for OpenConnection {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// The graceful stop, on the first SIGTERM or SIGINT: stop accepting,
/// close every connection after its next answer, wait (at most `timeout`)
/// until none is open, then stop the server.
///
/// Not actix's graceful stop alone: its workers count a kept-alive
/// connection between requests as idle and close it, even with a request
/// on its way; here the stop waits for connections to close by themselves.
async fn stop_on_signal(
    server: actix_web::dev::ServerHandle,
    state: Arc<AppState>,
    open: Arc<AtomicUsize>,
    timeout: Duration,
) {
    let name = signalled().await;
    let started = std::time::Instant::now();
    // Answers from now on carry `Connection: close`, /readyz answers 503.
    state.begin_shutdown();
    server.pause().await;
    log::info!(
        "{name} received: accepting no connections; finishing the {} open ones (for at most {} s)",
        open.load(Ordering::Relaxed),
        timeout.as_secs()
    );
    while open.load(Ordering::Relaxed) > 0 && started.elapsed() < timeout {
        actix_web::rt::time::sleep(Duration::from_millis(20)).await;
    }
    let left = open.load(Ordering::Relaxed);
    if left > 0 {
        log::warn!(
            "closing {left} connections still open after {} s (--shutdown-timeout)",
            timeout.as_secs()
        );
    } else {
        log::info!(
            "every connection closed after {} ms",
            started.elapsed().as_millis()
        );
    }
    server.stop(left == 0).await;
}

#[cfg(unix)]
async fn signalled() -> &'static str {
    use actix_web::rt::signal::unix::{signal, SignalKind};
    use std::task::Poll;
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        log::error!("cannot listen for SIGTERM and SIGINT: stopping on them is not graceful");
        return std::future::pending().await;
    };
    std::future::poll_fn(|cx| {
        if term.poll_recv(cx).is_ready() {
            Poll::Ready("SIGTERM")
        } else if int.poll_recv(cx).is_ready() {
            Poll::Ready("SIGINT")
        } else {
            Poll::Pending
        }
    })
    .await
}

#[cfg(not(unix))]
async fn signalled() -> &'static str {
    if actix_web::rt::signal::ctrl_c().await.is_err() {
        return std::future::pending().await;
    }
    "Ctrl-C"
}
