//! Kafka's SaslServerAuthenticator: the exchange a connection to a SASL
//! listener goes through before its first other request, and again when
//! the client re-authenticates (KIP-368). An optional ApiVersions, then
//! SaslHandshake naming a mechanism; with SaslHandshake v1 the tokens
//! travel in SaslAuthenticate requests, with v0 as bare size-prefixed
//! frames. Any failure closes the connection after
//! `connection.failed.authentication.delay.ms`, with Kafka's answer first
//! where Kafka sends one.

use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use kafka_protocol::messages::{
    ApiKey, SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest,
    SaslHandshakeResponse,
};
use kafka_protocol::protocol::StrBytes;

use crate::handlers::api_versions::unsupported_version_response;
use crate::handlers::{self, respond, KafkaApis};
use crate::protocol::principal::KafkaPrincipal;
use crate::protocol::{
    decode_body, errors, parse_request_from, ClientIdentity, FrameError, Request,
};
use crate::security::credential_cache::CredentialCache;
use crate::security::sasl::{
    CredentialSource, SaslFailure, SaslServer, SaslStep, ScramCredential, ScramMechanism,
};
use crate::server::connection::FrameIo;
use crate::server::listener::{ListenerSecurity, SaslListener};

/// An authenticated SASL session.
pub struct SaslSession {
    pub principal: Arc<KafkaPrincipal>,
    pub mechanism: String,
    /// When the session ends (`connections.max.reauth.ms`); a request
    /// after it, other than a re-authentication, closes the connection.
    pub expires_at: Option<Instant>,
}

impl SaslSession {
    pub fn expired(&self, now: Instant) -> bool {
        self.expires_at.is_some_and(|t| now > t)
    }

    /// Only a session with an end can be re-authenticated; otherwise a
    /// SaslHandshake after login is an ordinary request (ILLEGAL_SASL_STATE).
    pub fn renewable(&self) -> bool {
        self.expires_at.is_some()
    }
}

/// The users a listener's mechanisms look up.
struct ListenerCredentials<'a> {
    plain_users: &'a BTreeMap<String, String>,
    scram: &'a CredentialCache,
}

impl CredentialSource for ListenerCredentials<'_> {
    fn plain_password(&self, user: &str) -> Option<String> {
        self.plain_users.get(user).cloned()
    }

    fn scram_credential(&self, user: &str, mechanism: ScramMechanism) -> Option<ScramCredential> {
        self.scram.get(user, mechanism)
    }
}

enum Stage {
    /// The first request: ApiVersions or SaslHandshake.
    HandshakeOrVersions,
    Handshake,
    Authenticate {
        server: SaslServer,
        legacy: bool,
    },
    Done(SaslSession),
}

/// A failed exchange: the answer Kafka sends, if any, then the close.
struct Failure {
    answer: Option<handlers::HandlerResult>,
    reason: String,
}

impl From<String> for Failure {
    fn from(reason: String) -> Failure {
        Failure {
            answer: None,
            reason,
        }
    }
}

/// One exchange: the connection's first, or a re-authentication
/// (`previous`, with the SaslHandshake frame that started it).
pub struct Exchange<'a> {
    pub ctx: &'a Rc<KafkaApis>,
    pub listener: &'a ListenerSecurity,
    pub sasl: &'a SaslListener,
    /// The connection before this exchange (ANONYMOUS before the first).
    pub identity: &'a ClientIdentity,
    pub previous: Option<&'a SaslSession>,
}

impl Exchange<'_> {
    pub async fn run(
        &self,
        io: &mut FrameIo<'_, '_>,
        mut first_frame: Option<Bytes>,
    ) -> Result<SaslSession, String> {
        let mut stage = match self.previous {
            Some(_) => Stage::Handshake,
            None => Stage::HandshakeOrVersions,
        };
        loop {
            let frame = match first_frame.take() {
                Some(frame) => frame,
                None => io.next_frame().await?,
            };
            stage = match self.step(io, stage, frame).await {
                Ok(Stage::Done(session)) => return Ok(session),
                Ok(next) => next,
                Err(failure) => {
                    // Slows password guessing; Kafka delays every failed
                    // authentication's answer and close alike.
                    let delay_ms = self.listener.failed_authentication_delay_ms;
                    if delay_ms > 0 {
                        glommio::timer::sleep(Duration::from_millis(delay_ms)).await;
                    }
                    if let Some(answer) = failure.answer {
                        io.write(answer).await?;
                    }
                    return Err(failure.reason);
                }
            };
        }
    }

    async fn step(
        &self,
        io: &mut FrameIo<'_, '_>,
        stage: Stage,
        frame: Bytes,
    ) -> Result<Stage, Failure> {
        match stage {
            Stage::Authenticate {
                mut server,
                legacy: true,
            } => Ok(match self.legacy_token(io, &mut server, &frame).await? {
                Some(session) => Stage::Done(session),
                None => Stage::Authenticate {
                    server,
                    legacy: true,
                },
            }),
            Stage::Authenticate {
                mut server,
                legacy: false,
            } => {
                let req = self.authenticate_request(frame)?;
                Ok(match self.authenticate(io, &mut server, &req).await? {
                    Some(session) => Stage::Done(session),
                    None => Stage::Authenticate {
                        server,
                        legacy: false,
                    },
                })
            }
            Stage::HandshakeOrVersions | Stage::Handshake => {
                let versions_allowed = matches!(stage, Stage::HandshakeOrVersions);
                self.handshake_stage(io, frame, versions_allowed).await
            }
            Stage::Done(session) => Ok(Stage::Done(session)),
        }
    }

    /// A request while no mechanism is chosen: ApiVersions (once, first)
    /// or SaslHandshake; anything else closes the connection unanswered.
    async fn handshake_stage(
        &self,
        io: &mut FrameIo<'_, '_>,
        frame: Bytes,
        versions_allowed: bool,
    ) -> Result<Stage, Failure> {
        match parse_request_from(frame, self.identity) {
            Ok(req) if req.api_key == ApiKey::ApiVersions && versions_allowed => {
                let result = handlers::dispatch(self.ctx, req).await;
                io.write(result).await?;
                Ok(Stage::Handshake)
            }
            Ok(req) if req.api_key == ApiKey::SaslHandshake => self.handshake(io, &req).await,
            Ok(req) => Err(format!(
                "Unexpected Kafka request of type {:?} during SASL handshake.",
                req.api_key
            )
            .into()),
            Err(FrameError::UnsupportedVersion {
                api_key: ApiKey::ApiVersions,
                correlation_id,
                ..
            }) if versions_allowed => {
                io.write_bytes(&unsupported_version_response(correlation_id))
                    .await?;
                Ok(Stage::HandshakeOrVersions)
            }
            Err(e) => Err(format!("bad request during SASL handshake: {e:?}").into()),
        }
    }

    /// SaslHandshake: the mechanism must be enabled on this listener and,
    /// when re-authenticating, be the session's (then it is the only one
    /// offered).
    async fn handshake(&self, io: &mut FrameIo<'_, '_>, req: &Request) -> Result<Stage, Failure> {
        let request: SaslHandshakeRequest = decode_body(req)?;
        let mechanism = request.mechanism.to_string();
        let offered: Vec<StrBytes> = match self.previous {
            Some(p) => vec![StrBytes::from_string(p.mechanism.clone())],
            None => self
                .sasl
                .mechanisms
                .iter()
                .map(|m| StrBytes::from_string(m.clone()))
                .collect(),
        };
        let server = offered
            .iter()
            .any(|m| m.as_str() == mechanism)
            .then(|| match self.previous {
                Some(_) => SaslServer::new_reauthentication(&mechanism),
                None => SaslServer::new(&mechanism),
            })
            .flatten();
        let Some(server) = server else {
            let response = SaslHandshakeResponse::default()
                .with_error_code(errors::UNSUPPORTED_SASL_MECHANISM.code())
                .with_mechanisms(offered);
            return Err(Failure {
                answer: Some(respond(req, &response)),
                reason: format!("Unsupported SASL mechanism {mechanism}"),
            });
        };
        let response = SaslHandshakeResponse::default().with_mechanisms(offered);
        io.write(respond(req, &response)).await?;
        Ok(Stage::Authenticate {
            server,
            legacy: req.api_version == 0,
        })
    }

    /// After SaslHandshake v1 only SaslAuthenticate may come; Kafka answers
    /// a second SaslHandshake or a Metadata with ILLEGAL_SASL_STATE before
    /// it closes, anything else it closes unanswered.
    fn authenticate_request(&self, frame: Bytes) -> Result<Request, Failure> {
        let req = parse_request_from(frame, self.identity)
            .map_err(|e| format!("bad request during SASL authentication: {e:?}"))?;
        if req.api_key == ApiKey::SaslAuthenticate {
            return Ok(req);
        }
        let answer = match req.api_key {
            ApiKey::SaslHandshake => Some(respond(
                &req,
                &SaslHandshakeResponse::default()
                    .with_error_code(errors::ILLEGAL_SASL_STATE.code()),
            )),
            ApiKey::Metadata => Some(handlers::metadata::error_response(
                &req,
                errors::ILLEGAL_SASL_STATE,
            )),
            _ => None,
        };
        Err(Failure {
            answer,
            reason: format!(
                "Unexpected Kafka request of type {:?} during SASL authentication.",
                req.api_key
            ),
        })
    }

    /// One SaslAuthenticate request; Some once the exchange is complete.
    async fn authenticate(
        &self,
        io: &mut FrameIo<'_, '_>,
        server: &mut SaslServer,
        req: &Request,
    ) -> Result<Option<SaslSession>, Failure> {
        let request: SaslAuthenticateRequest = decode_body(req)?;
        // Kafka answers an empty message, not null, when all is well.
        let answer = |token: Vec<u8>| {
            SaslAuthenticateResponse::default()
                .with_error_message(Some(StrBytes::from_static_str("")))
                .with_auth_bytes(token.into())
        };
        match self.evaluate(server, &request.auth_bytes) {
            Ok((SaslStep::Challenge(token), _)) => {
                io.write(respond(req, &answer(token))).await?;
                Ok(None)
            }
            Ok((SaslStep::Complete { final_token, .. }, session)) => {
                let lifetime_ms = if req.api_version >= 1 {
                    self.sasl.max_reauth_ms
                } else {
                    0
                };
                let session = SaslSession {
                    expires_at: (lifetime_ms > 0)
                        .then(|| Instant::now() + Duration::from_millis(lifetime_ms as u64)),
                    ..session
                };
                let response = answer(final_token).with_session_lifetime_ms(lifetime_ms);
                io.write(respond(req, &response)).await?;
                Ok(Some(session))
            }
            Err(failure) => {
                let response = SaslAuthenticateResponse::default()
                    .with_error_code(errors::SASL_AUTHENTICATION_FAILED.code())
                    .with_error_message(Some(StrBytes::from_string(failure.message)));
                Err(Failure {
                    answer: (!failure.close_without_response).then(|| respond(req, &response)),
                    reason: failure.detail,
                })
            }
        }
    }

    /// A bare token after SaslHandshake v0; the answer is a bare
    /// size-prefixed token, and a failure closes the connection unanswered.
    async fn legacy_token(
        &self,
        io: &mut FrameIo<'_, '_>,
        server: &mut SaslServer,
        token: &[u8],
    ) -> Result<Option<SaslSession>, Failure> {
        let evaluated = self.evaluate(server, token).map_err(|f| f.detail)?;
        let (answer, session) = match evaluated {
            (SaslStep::Challenge(token), _) => (token, None),
            (SaslStep::Complete { final_token, .. }, session) => (final_token, Some(session)),
        };
        let size = i32::try_from(answer.len()).map_err(|_| "SASL token too large".to_string())?;
        let mut framed = Vec::with_capacity(4 + answer.len());
        framed.extend_from_slice(&size.to_be_bytes());
        framed.extend_from_slice(&answer);
        io.write_bytes(&framed).await?;
        Ok(session)
    }

    /// Evaluates a token; on completion the session it makes (principal
    /// checked against the session being re-authenticated).
    fn evaluate(
        &self,
        server: &mut SaslServer,
        token: &[u8],
    ) -> Result<(SaslStep, SaslSession), SaslFailure> {
        let credentials = ListenerCredentials {
            plain_users: &self.sasl.plain_users,
            scram: &self.ctx.quotas.credentials,
        };
        let step = server.evaluate(token, &credentials)?;
        let principal = match &step {
            SaslStep::Complete {
                authorization_id, ..
            } => KafkaPrincipal::user(authorization_id.clone()),
            SaslStep::Challenge(_) => KafkaPrincipal::anonymous(),
        };
        if let (SaslStep::Complete { .. }, Some(previous)) = (&step, self.previous) {
            if *previous.principal != principal {
                let (was, now) = (&previous.principal, &principal);
                let message = format!(
                    "Cannot change principals during re-authentication from {}.{}: {}.{}",
                    was.principal_type, was.name, now.principal_type, now.name
                );
                return Err(SaslFailure {
                    detail: message.clone(),
                    message,
                    close_without_response: false,
                });
            }
        }
        let session = SaslSession {
            principal: Arc::new(principal),
            mechanism: server.mechanism().to_string(),
            expires_at: None,
        };
        Ok((step, session))
    }
}
